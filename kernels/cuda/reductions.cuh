// Sums inside a warp and a block, in a fixed order: the butterfly of shuffles and the per-warp tree below
// always add the same values in the same order, so a reduction built from them (block partials written to
// scratch, then summed by one block: fold_partials_kernel) gives the same bits on every run. Kernels that
// reduce over every token (lambda and gate gradients, loss sums, norms) use these instead of atomics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

// The second stage of a grid-wide sum. partials: (blocks, values) f32, row-major, one row of partial sums per
// block of the kernel that wrote them (values = 1: a plain array). Block v of this kernel takes column v:
// thread t adds rows t, t + blockDim.x, ... in double, block_sum adds the threads in its fixed tree, and
// thread 0 calls finish(v, total). The order depends only on `blocks` and blockDim.x (a multiple of 32, at
// most 1024), so the total has the same bits on every run; double keeps partials of either sign from losing
// bits, as the CPU ops' fp64 sums do.
template <class Finish>
__global__ void fold_partials_kernel(const float* partials, int blocks, int values, Finish finish) {
  __shared__ double shared[kWarpSize];
  const int column = static_cast<int>(blockIdx.x);
  double sum = 0;
  for (int b = static_cast<int>(threadIdx.x); b < blocks; b += static_cast<int>(blockDim.x))
    sum += partials[static_cast<int64_t>(b) * values + column];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) finish(column, sum);
}

// finish for fold_partials_kernel: into[v] += sign * total, the total rounded to f32 once, as the CPU ops add
// their fp64 totals to an f32 gradient.
struct AddTotal {
  float* into;
  double sign = 1.0;
  __device__ void operator()(int column, double total) const {
    into[column] += static_cast<float>(sign * total);
  }
};

}  // namespace nanoforge::cuda
