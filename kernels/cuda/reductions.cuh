// Sums inside a warp and a block, in a fixed order: the butterfly of shuffles and the per-warp tree below
// always add the same values in the same order, so a reduction built from them (block partials written to
// scratch, then summed by one block) gives the same bits on every run. Kernels that reduce over every token
// (lambda and gate gradients, loss sums, norms) use these instead of atomics.
#pragma once

#include <cuda_runtime.h>

namespace nanoforge::cuda {

inline constexpr int kWarpSize = 32;

// The sum of `value` over the 32 lanes of a warp, returned to every lane. All 32 lanes must call it.
template <class T>
__device__ inline T warp_sum(T value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// The sum of `value` over every thread of the block, returned to every thread. blockDim.x must be a
// multiple of 32 and at most 1024, every thread must call it, and `shared` must hold 32 elements. It ends
// with a barrier, so the same `shared` can be used again right after.
template <class T>
__device__ inline T block_sum(T value, T* shared) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  value = warp_sum(value);
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}

}  // namespace nanoforge::cuda
