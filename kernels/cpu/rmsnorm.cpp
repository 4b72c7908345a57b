// CPU RMSNorm without a learned weight (nanochat's norm and, with scale 1.2, its QK-norm), one row per
// iteration. The backward uses the saved output and rstd instead of the input:
//   d_x = rstd * (scale * d_out - out * mean(d_out * out) / scale).
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {

template <class T>
void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale) {
  check_same_shape(out, x, "rmsnorm_forward");
  const int64_t width = x.dim(-1);
  const int64_t rows = x.numel() / width;
  NANOFORGE_CHECK(rstd.numel() == rows, "rmsnorm_forward: rstd {} must hold {} rows", rstd.describe(), rows);
  const T* in = x.as<T>();
  T* result = out.as<T>();
  T* inv_rms = rstd.as<T>();
  const T factor = static_cast<T>(scale);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = in + r * width;
    T sum_squares = 0;
#pragma omp simd reduction(+ : sum_squares)
    for (int64_t c = 0; c < width; ++c)
      sum_squares += row[c] * row[c];
    const T inv =
        static_cast<T>(1) / std::sqrt(sum_squares / static_cast<T>(width) + static_cast<T>(ops::kRmsNormEps));
    inv_rms[r] = inv;
    const T multiplier = inv * factor;
    T* dst = result + r * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c)
      dst[c] = row[c] * multiplier;
  }
}

template <class T>
void rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                      Accumulate mode) {
  check_same_shape(d_out, out, "rmsnorm_backward");
  check_same_shape(d_x, out, "rmsnorm_backward");
  const int64_t width = out.dim(-1);
  const int64_t rows = out.numel() / width;
  NANOFORGE_CHECK(rstd.numel() == rows, "rmsnorm_backward: rstd {} must hold {} rows", rstd.describe(), rows);
  const T* grad = d_out.as<T>();
  const T* y = out.as<T>();
  const T* inv_rms = rstd.as<T>();
  T* result = d_x.as<T>();
  const T factor = static_cast<T>(scale);
  const bool add = mode == Accumulate::kYes;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = grad + r * width;
    const T* yr = y + r * width;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < width; ++c)
      dot += g[c] * yr[c];
    const T inv = inv_rms[r];
    const T projection = dot / static_cast<T>(width) / factor;
    const T g_scale = inv * factor;
    T* dst = result + r * width;
    if (add) {
#pragma omp simd
      for (int64_t c = 0; c < width; ++c)
        dst[c] += g_scale * g[c] - inv * yr[c] * projection;
    } else {
#pragma omp simd
      for (int64_t c = 0; c < width; ++c)
        dst[c] = g_scale * g[c] - inv * yr[c] * projection;
    }
  }
}

template void rmsnorm_forward<float>(TensorView, TensorView, TensorView, double);
template void rmsnorm_forward<double>(TensorView, TensorView, TensorView, double);
template void rmsnorm_backward<float>(TensorView, TensorView, TensorView, TensorView, double, Accumulate);
template void rmsnorm_backward<double>(TensorView, TensorView, TensorView, TensorView, double, Accumulate);

}  // namespace nanoforge::cpu
