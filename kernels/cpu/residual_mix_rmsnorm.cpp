// CPU pass of nanochat's per-layer residual mix resid_lambda * x + x0_lambda * x0 with the RMSNorm that
// follows it (every block's input), forward and backward, one row at a time. Each row does the arithmetic
// of the unfused sequence (the mix, then rmsnorm_rows.h), so the results are bitwise those of the separate
// mix and norm ops this pass replaced. Lambda gradients are ordered sums over rows (thread-count
// independent).
#include "kernels/cpu/amax.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/ordered_sums.h"
#include "kernels/cpu/rmsnorm_rows.h"

namespace nanoforge::cpu {
namespace {

constexpr const char* kForward = "residual_mix_rmsnorm_forward";
constexpr const char* kBackward = "residual_mix_rmsnorm_backward";

void check_scalar(const TensorView& t, const char* op, const char* name) {
  NANOFORGE_CHECK(t.numel() == 1, "{}: {} must have one element, got {}", op, name, t.describe());
}

void check_rstd(const TensorView& rstd, int64_t rows, const char* op) {
  NANOFORGE_CHECK(rstd.numel() == rows, "{}: rstd {} must hold {} rows", op, rstd.describe(), rows);
}

}  // namespace

template <class T>
void residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                  TensorView x0, TensorView resid_lambda, TensorView x0_lambda,
                                  ops::AmaxOutput amax) {
  for (const TensorView* t : {&residual, &out, &x0})
    check_same_shape(*t, x, kForward);
  check_scalar(resid_lambda, kForward, "resid_lambda");
  check_scalar(x0_lambda, kForward, "x0_lambda");
  const int64_t width = x.dim(-1), rows = x.numel() / width;
  check_rstd(rstd, rows, kForward);
  const T a = *resid_lambda.as<T>(), b = *x0_lambda.as<T>();
  const T* in = x.as<T>();
  const T* in0 = x0.as<T>();
  T* mixed = residual.as<T>();
  T* normed = out.as<T>();
  T* inv_rms = rstd.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t offset = r * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c)
      mixed[offset + c] = a * in[offset + c] + b * in0[offset + c];
    inv_rms[r] = rmsnorm_row_forward(normed + offset, mixed + offset, width, T{1});
  }
  write_amax<T>(amax, out);
}

template <class T>
void residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView d_resid_lambda,
                                   TensorView d_x0_lambda, TensorView d_out, TensorView out, TensorView rstd,
                                   TensorView x, TensorView x0, TensorView resid_lambda,
                                   TensorView x0_lambda) {
  for (const TensorView* t : {&d_residual, &d_x0, &d_out, &out, &x0})
    check_same_shape(*t, x, kBackward);
  check_scalar(d_resid_lambda, kBackward, "d_resid_lambda");
  check_scalar(d_x0_lambda, kBackward, "d_x0_lambda");
  check_scalar(resid_lambda, kBackward, "resid_lambda");
  check_scalar(x0_lambda, kBackward, "x0_lambda");
  const int64_t width = x.dim(-1), rows = x.numel() / width;
  check_rstd(rstd, rows, kBackward);
  const T a = *resid_lambda.as<T>(), b = *x0_lambda.as<T>();
  const T* in = x.as<T>();
  const T* in0 = x0.as<T>();
  const T* d_normed = d_out.as<T>();
  const T* normed = out.as<T>();
  const T* inv_rms = rstd.as<T>();
  T* grad = d_residual.as<T>();
  T* d_in0 = d_x0.as<T>();
  double totals[2];
  ordered_sums(rows, 2, totals, [&](int64_t begin, int64_t end, double* partial) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t offset = r * width;
      // g = d_residual + the norm's gradient, kept in d_residual (then overwritten by d_x below).
      rmsnorm_row_backward(grad + offset, d_normed + offset, normed + offset, inv_rms[r], width, T{1},
                           /*add=*/true);
      T dot_x = 0, dot_x0 = 0;
#pragma omp simd reduction(+ : dot_x, dot_x0)
      for (int64_t c = 0; c < width; ++c) {
        const int64_t i = offset + c;
        const T g = grad[i];
        dot_x += g * in[i];
        dot_x0 += g * in0[i];
        d_in0[i] += b * g;
        grad[i] = a * g;
      }
      partial[0] += static_cast<double>(dot_x);
      partial[1] += static_cast<double>(dot_x0);
    }
  });
  *d_resid_lambda.as<T>() += static_cast<T>(totals[0]);
  *d_x0_lambda.as<T>() += static_cast<T>(totals[1]);
}

NANOFORGE_CPU_INSTANTIATE(residual_mix_rmsnorm_forward);
NANOFORGE_CPU_INSTANTIATE(residual_mix_rmsnorm_backward);

}  // namespace nanoforge::cpu
