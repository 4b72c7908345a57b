// CPU AdamW, one fused pass per parameter (decoupled weight decay, both moments, bias-corrected step), as
// PyTorch's AdamW and nanochat's fused version compute it.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {

template <class T>
void adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                  const ops::AdamWStep& hyper) {
  for (const TensorView* t : {&grad, &exp_avg, &exp_avg_sq})
    check_same_shape(*t, param, "adamw_update");
  NANOFORGE_CHECK(hyper.step >= 1, "adamw_update: step counts from 1, got {}", hyper.step);
  const T decay = static_cast<T>(1.0 - hyper.lr * hyper.weight_decay);
  const T w1 = static_cast<T>(1.0 - hyper.beta1), w2 = static_cast<T>(1.0 - hyper.beta2);
  const double bias1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(hyper.step));
  const double bias2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(hyper.step));
  const T step_size = static_cast<T>(hyper.lr / bias1);
  const T inv_sqrt_bias2 = static_cast<T>(1.0 / std::sqrt(bias2));
  const T eps = static_cast<T>(hyper.eps);
  T* p = param.as<T>();
  const T* g = grad.as<T>();
  T* m = exp_avg.as<T>();
  T* v = exp_avg_sq.as<T>();
  const int64_t n = param.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    m[i] += w1 * (gi - m[i]);
    v[i] += w2 * (gi * gi - v[i]);
    p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bias2 + eps);
  }
}

NANOFORGE_CPU_INSTANTIATE(adamw_update);

}  // namespace nanoforge::cpu
