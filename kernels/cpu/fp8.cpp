// CPU FP8: nanochat's tensorwise quantisation (fp8.py _to_fp8) and the scaled GEMM as PyTorch runs
// torch._scaled_mm on a CPU: each operand decoded and multiplied by its inverse scale in fp32, then an
// ordinary GEMM (PyTorch's CPU kernel computes exactly (a.float() * scale_a) @ (b.float() * scale_b)).
// The amax is kernels/cpu/amax.h's; the codes are kernels/fp8_format.h's. kernels/ops.cpp checks the shapes.
#include <vector>

#include "kernels/cpu/amax.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/fp8_format.h"

namespace nanoforge::cpu {

// kernels/ops.cpp checked the shapes and the scalars.
template <class T>
void fp8_quantize(TensorView q, TensorView q_transposed, TensorView inv_scale, TensorView amax,
                  ops::Fp8Amax amax_source, TensorView x, int64_t first_column) {
  const bool has_q = q.data != nullptr;
  const fp8::Format format = fp8::format_of(has_q ? q.dtype : q_transposed.dtype);
  const int64_t rows = x.shape[0], stride = x.shape[1];
  const int64_t cols = has_q ? q.shape[1] : q_transposed.shape[0];
  const T* data = x.as<T>();
  if (amax_source == ops::Fp8Amax::kCompute) {
    *amax.as<float>() = column_block_amax(data, rows, stride, first_column, cols);
  }
  const float scale = fp8::tensorwise_scale(*amax.as<float>(), format);
  *inv_scale.as<float>() = fp8::inverse_scale(scale);
  auto* out = static_cast<std::uint8_t*>(q.data);
  auto* out_t = static_cast<std::uint8_t*>(q_transposed.data);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      // fp8.py: x.float() * scale in fp32, then the saturating cast (its clamp).
      const std::uint8_t code =
          fp8::quantize(static_cast<float>(data[r * stride + first_column + c]), scale, format);
      if (out != nullptr) out[r * cols + c] = code;
      if (out_t != nullptr) out_t[c * rows + r] = code;
    }
  }
}

template <class T>
void fp8_matmul(TensorView out, int64_t out_first_column, TensorView a, TensorView a_inv_scale, TensorView b,
                TensorView b_inv_scale, double beta) {
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  const fp8::Format a_format = fp8::format_of(a.dtype), b_format = fp8::format_of(b.dtype);
  const float a_inv = *a_inv_scale.as<float>(), b_inv = *b_inv_scale.as<float>();
  // torch._scaled_mm on the CPU: a.float() * scale_a and b.float() * scale_b, rounded to fp32, then the GEMM.
  std::vector<T> a_values(m * k), b_values(n * k);
  const auto* a_codes = static_cast<const std::uint8_t*>(a.data);
  const auto* b_codes = static_cast<const std::uint8_t*>(b.data);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m * k; ++i)
    a_values[i] = static_cast<T>(fp8::decode(a_codes[i], a_format) * a_inv);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n * k; ++i)
    b_values[i] = static_cast<T>(fp8::decode(b_codes[i], b_format) * b_inv);
  if (m == 0 || n == 0) return;
  gemm<T>(false, true, m, n, k, T(1), a_values.data(), k, b_values.data(), k, static_cast<T>(beta),
          out.as<T>() + out_first_column, out.shape[1]);
}

NANOFORGE_CPU_INSTANTIATE(fp8_quantize);
NANOFORGE_CPU_INSTANTIATE(fp8_matmul);

}  // namespace nanoforge::cpu
