// CPU ReLU^2, the MLP activation of nanochat: relu(x)^2, with gradient 2 relu(x), computed from the
// forward's output as 2 sqrt(relu(x)^2): with correctly rounded products and square roots, sqrt(fl(r * r))
// is r exactly unless r * r underflows, so the model keeps only relu(x)^2.
#include <cmath>

#include "kernels/cpu/amax.h"
#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {

template <class T>
void relu_squared_forward(TensorView out, TensorView x, ops::AmaxOutput amax) {
  check_same_shape(out, x, "relu_squared_forward");
  const T* in = x.as<T>();
  T* result = out.as<T>();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T r = in[i] > T{0} ? in[i] : T{0};  // not std::max: its reference return blocks vectorisation
    result[i] = r * r;
  }
  write_amax<T>(amax, out);
}

template <class T>
void relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out) {
  check_same_shape(d_out, out, "relu_squared_backward");
  check_same_shape(d_x, out, "relu_squared_backward");
  const T* squared = out.as<T>();
  const T* grad = d_out.as<T>();
  T* result = d_x.as<T>();
  const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T r = std::sqrt(squared[i] > T{0} ? squared[i] : T{0});
    result[i] = T{2} * r * grad[i];
  }
}

NANOFORGE_CPU_INSTANTIATE(relu_squared_forward);
NANOFORGE_CPU_INSTANTIATE(relu_squared_backward);

}  // namespace nanoforge::cpu
