// A training step's scalars kept on the device, so that data parallelism reads them back once per step
// rather than once per micro-batch: add_mean_loss adds a micro-batch's mean loss to a running f64 total.
// It sums with sum_loss's own block_loss_totals (loss_totals.cuh), so the total has the bits the host would
// get adding sum_loss's means.
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loss_totals.cuh"

namespace nanoforge::cuda {
namespace {

// total += sum / count over the rows whose target is not ignored; `nan` when there are none.
__global__ void __launch_bounds__(kLossTotalsThreads)
    add_mean_loss_kernel(double* total, const float* losses, const int32_t* targets, int64_t rows,
                         double nan) {
  const LossTotals totals = block_loss_totals(losses, targets, rows);
  if (threadIdx.x == 0) *total += totals.count > 0 ? totals.sum / static_cast<double>(totals.count) : nan;
}

}  // namespace

void add_mean_loss(TensorView total, TensorView losses, TensorView targets) {
  constexpr const char* kOp = "add_mean_loss";
  check_tensor(total, DType::kF64, kOp, "total");
  check_tensor(losses, DType::kF32, kOp, "losses");
  check_tensor(targets, DType::kI32, kOp, "targets");
  NANOFORGE_CHECK(losses.numel() == targets.numel(), "{} on CUDA: losses {} and targets {} differ in length",
                  kOp, losses.describe(), targets.describe());
  launch_kernel<add_mean_loss_kernel>(1, kLossTotalsThreads)(total.as<double>(), losses.as<float>(),
                                                             targets.as<int32_t>(), losses.numel(),
                                                             std::numeric_limits<double>::quiet_NaN());
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
