// A training step's scalars kept on the device, so that data parallelism reads them back once per step
// rather than once per micro-batch: add_mean_loss adds a micro-batch's mean loss to a running f64 total.
// It sums exactly as sum_loss does (one block of 1024 threads, thread i takes rows i, i + 1024, ... in fp64,
// then block_sum's fixed tree), so the total has the bits the host would get adding sum_loss's means.
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reductions.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int32_t kIgnoreIndex = -1;  // nanochat's F.cross_entropy(ignore_index=-1)
constexpr int kThreads = 1024;        // sum_loss's block: the same partial sums, the same bits

// total += sum / count over the rows whose target is not ignored; `nan` when there are none.
__global__ void __launch_bounds__(kThreads)
    add_mean_loss_kernel(double* total, const float* losses, const int32_t* targets, int64_t rows,
                         double nan) {
  __shared__ double shared_sum[kWarpSize];
  __shared__ long long shared_count[kWarpSize];
  double sum = 0;
  long long count = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    if (targets[i] == kIgnoreIndex) continue;
    sum += losses[i];
    ++count;
  }
  sum = block_sum(sum, shared_sum);
  count = block_sum(count, shared_count);
  if (threadIdx.x == 0) *total += count > 0 ? sum / static_cast<double>(count) : nan;
}

}  // namespace

void add_mean_loss(TensorView total, TensorView losses, TensorView targets) {
  constexpr const char* kOp = "add_mean_loss";
  check_tensor(total, DType::kF64, kOp, "total");
  check_tensor(losses, DType::kF32, kOp, "losses");
  check_tensor(targets, DType::kI32, kOp, "targets");
  NANOFORGE_CHECK(losses.numel() == targets.numel(), "{} on CUDA: losses {} and targets {} differ in length",
                  kOp, losses.describe(), targets.describe());
  launch_kernel<add_mean_loss_kernel>(1, kThreads)(total.as<double>(), losses.as<float>(),
                                                   targets.as<int32_t>(), losses.numel(),
                                                   std::numeric_limits<double>::quiet_NaN());
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
