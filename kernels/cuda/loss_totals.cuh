// The sum and count of the kept rows' losses, as one block adds them: sum_loss reads them back and
// add_mean_loss keeps their mean on the device, and both must give the same bits (a step's loss is the same
// whether or not it is read back per micro-batch), so both kernels call this one sum.
#pragma once

#include <cstdint>

#include "kernels/cuda/reductions.cuh"

namespace nanoforge::cuda {

inline constexpr int32_t kIgnoreIndex = -1;      // nanochat's F.cross_entropy(ignore_index=-1)
inline constexpr int kLossTotalsThreads = 1024;  // the block both kernels launch: the same partial sums

struct LossTotals {
  double sum;
  long long count;
};

// losses: (rows) f32, targets: (rows) i32; called by every thread of the one block. Thread i sums rows i,
// i + blockDim.x, ... in fp64 (and counts them), then block_sum adds the threads in its fixed tree: the same
// bits on every run. Every thread gets the totals.
__device__ inline LossTotals block_loss_totals(const float* losses, const int32_t* targets, int64_t rows) {
  __shared__ double shared_sum[kWarpSize];
  __shared__ long long shared_count[kWarpSize];
  double sum = 0;
  long long count = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    if (targets[i] == kIgnoreIndex) continue;
    sum += losses[i];
    ++count;
  }
  return {block_sum(sum, shared_sum), block_sum(count, shared_count)};
}

}  // namespace nanoforge::cuda
