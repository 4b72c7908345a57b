// CPU ops of nanochat's learned residual scalars: the per-layer mix resid_lambda * x + x0_lambda * x0
// before every block, and the backout that subtracts lambda times a mid-network snapshot before the final
// norm. Scalar gradients are ordered sums over rows (thread-count independent).
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/ordered_sums.h"

namespace nanoforge::cpu {
namespace {

void check_scalar(const TensorView& t, const char* op, const char* name) {
  NANOFORGE_CHECK(t.numel() == 1, "{}: {} must have one element, got {}", op, name, t.describe());
}

}  // namespace

template <class T>
void residual_mix_forward(TensorView out, TensorView x, TensorView x0, TensorView resid_lambda,
                          TensorView x0_lambda) {
  check_same_shape(out, x, "residual_mix_forward");
  check_same_shape(x0, x, "residual_mix_forward");
  check_scalar(resid_lambda, "residual_mix_forward", "resid_lambda");
  check_scalar(x0_lambda, "residual_mix_forward", "x0_lambda");
  const T a = *resid_lambda.as<T>(), b = *x0_lambda.as<T>();
  const T* in = x.as<T>();
  const T* in0 = x0.as<T>();
  T* result = out.as<T>();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    result[i] = a * in[i] + b * in0[i];
}

template <class T>
void residual_mix_backward(TensorView d_x, TensorView d_x0, TensorView d_resid_lambda, TensorView d_x0_lambda,
                           TensorView d_out, TensorView x, TensorView x0, TensorView resid_lambda,
                           TensorView x0_lambda) {
  for (const TensorView* t : {&d_x, &d_x0, &d_out, &x0})
    check_same_shape(*t, x, "residual_mix_backward");
  check_scalar(d_resid_lambda, "residual_mix_backward", "d_resid_lambda");
  check_scalar(d_x0_lambda, "residual_mix_backward", "d_x0_lambda");
  const T a = *resid_lambda.as<T>(), b = *x0_lambda.as<T>();
  const T* in = x.as<T>();
  const T* in0 = x0.as<T>();
  const T* grad = d_out.as<T>();
  T* d_in = d_x.as<T>();
  T* d_in0 = d_x0.as<T>();
  const int64_t width = x.dim(-1), rows = x.numel() / width;
  double totals[2];
  ordered_sums(rows, 2, totals, [&](int64_t begin, int64_t end, double* partial) {
    for (int64_t r = begin; r < end; ++r) {
      T dot_x = 0, dot_x0 = 0;
      const int64_t offset = r * width;
#pragma omp simd reduction(+ : dot_x, dot_x0)
      for (int64_t c = 0; c < width; ++c) {
        const int64_t i = offset + c;
        const T g = grad[i];
        dot_x += g * in[i];
        dot_x0 += g * in0[i];
        d_in0[i] += b * g;
        d_in[i] = a * g;
      }
      partial[0] += static_cast<double>(dot_x);
      partial[1] += static_cast<double>(dot_x0);
    }
  });
  *d_resid_lambda.as<T>() += static_cast<T>(totals[0]);
  *d_x0_lambda.as<T>() += static_cast<T>(totals[1]);
}

template <class T>
void backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView lambda) {
  check_same_shape(out, x, "backout_forward");
  check_same_shape(x_backout, x, "backout_forward");
  check_scalar(lambda, "backout_forward", "lambda");
  const T lam = *lambda.as<T>();
  const T* in = x.as<T>();
  const T* snapshot = x_backout.as<T>();
  T* result = out.as<T>();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    result[i] = in[i] - lam * snapshot[i];
}

template <class T>
void backout_backward(TensorView d_x_backout, TensorView d_lambda, TensorView d_out, TensorView x_backout,
                      TensorView lambda) {
  check_same_shape(d_x_backout, x_backout, "backout_backward");
  check_same_shape(d_out, x_backout, "backout_backward");
  check_scalar(lambda, "backout_backward", "lambda");
  check_scalar(d_lambda, "backout_backward", "d_lambda");
  const T lam = *lambda.as<T>();
  const T* snapshot = x_backout.as<T>();
  const T* grad = d_out.as<T>();
  T* d_snapshot = d_x_backout.as<T>();
  const int64_t width = x_backout.dim(-1), rows = x_backout.numel() / width;
  double total;
  ordered_sums(rows, 1, &total, [&](int64_t begin, int64_t end, double* partial) {
    for (int64_t r = begin; r < end; ++r) {
      T dot = 0;
      const int64_t offset = r * width;
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < width; ++c) {
        dot += grad[offset + c] * snapshot[offset + c];
        d_snapshot[offset + c] = -lam * grad[offset + c];
      }
      partial[0] += static_cast<double>(dot);
    }
  });
  *d_lambda.as<T>() -= static_cast<T>(total);
}

template void residual_mix_forward<float>(TensorView, TensorView, TensorView, TensorView, TensorView);
template void residual_mix_forward<double>(TensorView, TensorView, TensorView, TensorView, TensorView);
template void residual_mix_backward<float>(TensorView, TensorView, TensorView, TensorView, TensorView,
                                           TensorView, TensorView, TensorView, TensorView);
template void residual_mix_backward<double>(TensorView, TensorView, TensorView, TensorView, TensorView,
                                            TensorView, TensorView, TensorView, TensorView);
template void backout_forward<float>(TensorView, TensorView, TensorView, TensorView);
template void backout_forward<double>(TensorView, TensorView, TensorView, TensorView);
template void backout_backward<float>(TensorView, TensorView, TensorView, TensorView, TensorView);
template void backout_backward<double>(TensorView, TensorView, TensorView, TensorView, TensorView);

}  // namespace nanoforge::cpu
