// CPU op of nanochat's backout: subtract lambda times a mid-network snapshot before the final norm (the
// per-layer residual mix is fused with its norm: residual_mix_rmsnorm.cpp). The lambda's gradient is an
// ordered sum over rows (thread-count independent).
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/ordered_sums.h"

namespace nanoforge::cpu {
namespace {

void check_scalar(const TensorView& t, const char* op, const char* name) {
  NANOFORGE_CHECK(t.numel() == 1, "{}: {} must have one element, got {}", op, name, t.describe());
}

}  // namespace

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

NANOFORGE_CPU_INSTANTIATE(backout_forward);
NANOFORGE_CPU_INSTANTIATE(backout_backward);

}  // namespace nanoforge::cpu
