// CPU FP8: nanochat's tensorwise quantisation (fp8.py _to_fp8) and the scaled GEMM as PyTorch runs
// torch._scaled_mm on a CPU: each operand decoded and multiplied by its inverse scale in fp32, then an
// ordinary GEMM (PyTorch's CPU kernel computes exactly (a.float() * scale_a) @ (b.float() * scale_b)).
// The amax is a max, so any thread order gives the same bits; the codes are kernels/fp8_format.h's.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/fp8_format.h"

namespace nanoforge::cpu {
namespace {

fp8::Format format_of(const TensorView& q, const char* name) {
  NANOFORGE_CHECK(q.dtype == DType::kF8E4M3 || q.dtype == DType::kF8E5M2,
                  "fp8: {} {} must be f8e4m3 or f8e5m2", name, q.describe());
  return q.dtype == DType::kF8E4M3 ? fp8::Format::kE4m3 : fp8::Format::kE5m2;
}

// max |x[r, first .. first + cols)| in fp32 (fp8.py: x.float().abs().max()); NaN wins, as in torch.max.
template <class T>
float column_block_amax(const TensorView& x, int64_t first, int64_t cols) {
  const int64_t rows = x.shape[0], stride = x.shape[1];
  const T* data = x.as<T>();
  float amax = 0.0f;
  bool nan = false;
#pragma omp parallel for reduction(max : amax) reduction(|| : nan) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = std::fabs(static_cast<float>(data[r * stride + first + c]));
      nan = nan || std::isnan(v);
      amax = std::max(amax, v);
    }
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : amax;
}

}  // namespace

template <class T>
void fp8_quantize(TensorView q, TensorView q_transposed, TensorView inv_scale, TensorView x,
                  int64_t first_column) {
  check_rank(x, 2, "fp8_quantize", "x");
  NANOFORGE_CHECK(q.data != nullptr || q_transposed.data != nullptr, "fp8_quantize: no output");
  const TensorView& shape_from = q.data != nullptr ? q : q_transposed;
  const fp8::Format format = format_of(shape_from, "q");
  const bool transposed_only = q.data == nullptr;
  const int64_t rows = x.shape[0];
  const int64_t cols = transposed_only ? shape_from.shape[0] : shape_from.shape[1];
  NANOFORGE_CHECK(first_column >= 0 && first_column + cols <= x.shape[1],
                  "fp8_quantize: columns [{}, {}) outside x {}", first_column, first_column + cols,
                  x.describe());
  if (q.data != nullptr) {
    NANOFORGE_CHECK(q.rank == 2 && q.shape[0] == rows && q.shape[1] == cols, "fp8_quantize: q {} for {}x{}",
                    q.describe(), rows, cols);
  }
  if (q_transposed.data != nullptr) {
    NANOFORGE_CHECK(q_transposed.rank == 2 && q_transposed.shape[0] == cols &&
                        q_transposed.shape[1] == rows && format_of(q_transposed, "q_transposed") == format,
                    "fp8_quantize: q_transposed {} for {}x{}", q_transposed.describe(), cols, rows);
  }
  NANOFORGE_CHECK(inv_scale.dtype == DType::kF32 && inv_scale.numel() == 1,
                  "fp8_quantize: inv_scale {} must be one f32", inv_scale.describe());
  const float scale = fp8::tensorwise_scale(column_block_amax<T>(x, first_column, cols), format);
  *inv_scale.as<float>() = fp8::inverse_scale(scale);
  const T* data = x.as<T>();
  auto* out = static_cast<std::uint8_t*>(q.data);
  auto* out_t = static_cast<std::uint8_t*>(q_transposed.data);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      // fp8.py: x.float() * scale in fp32, then the saturating cast (its clamp).
      const std::uint8_t code =
          fp8::quantize(static_cast<float>(data[r * x.shape[1] + first_column + c]), scale, format);
      if (out != nullptr) out[r * cols + c] = code;
      if (out_t != nullptr) out_t[c * rows + r] = code;
    }
  }
}

template <class T>
void fp8_matmul(TensorView out, int64_t out_first_column, TensorView a, TensorView a_inv_scale, TensorView b,
                TensorView b_inv_scale, double beta) {
  check_rank(out, 2, "fp8_matmul", "out");
  check_rank(a, 2, "fp8_matmul", "a");
  check_rank(b, 2, "fp8_matmul", "b");
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  NANOFORGE_CHECK(
      b.shape[1] == k && out.shape[0] == m && out_first_column >= 0 && out_first_column + n <= out.shape[1],
      "fp8_matmul: {} @ {}^T does not fit columns [{}, {}) of {}", a.describe(), b.describe(),
      out_first_column, out_first_column + n, out.describe());
  const fp8::Format a_format = format_of(a, "a"), b_format = format_of(b, "b");
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
