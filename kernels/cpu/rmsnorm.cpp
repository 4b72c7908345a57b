// CPU RMSNorm without a learned weight (nanochat's norm), one row per iteration (rmsnorm_rows.h). The
// backward uses the saved output and rstd instead of the input:
//   d_x = rstd * (scale * d_out - out * mean(d_out * out) / scale).
#include "kernels/cpu/amax.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/rmsnorm_rows.h"

namespace nanoforge::cpu {

template <class T>
void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale, ops::AmaxOutput amax) {
  check_same_shape(out, x, "rmsnorm_forward");
  const int64_t width = x.dim(-1);
  const int64_t rows = x.numel() / width;
  NANOFORGE_CHECK(rstd.numel() == rows, "rmsnorm_forward: rstd {} must hold {} rows", rstd.describe(), rows);
  const T* in = x.as<T>();
  T* result = out.as<T>();
  T* inv_rms = rstd.as<T>();
  const T factor = static_cast<T>(scale);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    inv_rms[r] = rmsnorm_row_forward(result + r * width, in + r * width, width, factor);
  write_amax<T>(amax, out);
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
    rmsnorm_row_backward(result + r * width, grad + r * width, y + r * width, inv_rms[r], width, factor, add);
  }
}

NANOFORGE_CPU_INSTANTIATE(rmsnorm_forward);
NANOFORGE_CPU_INSTANTIATE(rmsnorm_backward);

}  // namespace nanoforge::cpu
