// A training step's scalars on the CPU (kernels/cuda/step_sums.cu is the GPU's): squared_norm's and
// sum_loss's results added to an f64 total in host memory, with the bits those ops return.
#include <limits>

#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {

template <class T>
void add_squared_norm(TensorView total, TensorView x) {
  total.as<double>()[0] += squared_norm<T>(x);
}

template <class T>
void add_mean_loss(TensorView total, TensorView losses, TensorView targets) {
  const ops::LossSum loss = sum_loss<T>(losses, targets);
  total.as<double>()[0] +=
      loss.count > 0 ? loss.sum / static_cast<double>(loss.count) : std::numeric_limits<double>::quiet_NaN();
}

NANOFORGE_CPU_INSTANTIATE(add_squared_norm);
NANOFORGE_CPU_INSTANTIATE(add_mean_loss);

}  // namespace nanoforge::cpu
