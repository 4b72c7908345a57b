// The tensorwise amax of FP8 training on the GPU (max |x|, kernels/fp8_amax.h), taken by fp8_quantize's own
// pass and fused into the kernels that produce an FP8 GEMM's input. The max is kept as the bits of a
// non-negative float in one unsigned word: such floats order like their bits, and every NaN's bits lie above
// infinity's, so a NaN wins as it does in torch's max. atomicMax on those bits gives the same result in any
// order. A warp folds its lanes first and raises the word only when it holds more than the word already does
// (few warps do once the max is found), so thousands of rows do not queue on one address.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/fp8_amax.h"

namespace nanoforge::cuda {

// The bits of |value|.
__device__ inline unsigned abs_bits(float value) {
  return __float_as_uint(fabsf(value));
}

// The largest of `bits` over the 32 lanes of a warp, returned to every lane. All 32 lanes must call it.
__device__ inline unsigned warp_max_bits(unsigned bits) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, offset));
  return bits;
}

// *amax_bits = max(*amax_bits, bits). A stale read only costs an atomic: the word never decreases.
__device__ inline void raise_amax(unsigned* amax_bits, unsigned bits) {
  if (bits > *static_cast<volatile unsigned*>(amax_bits)) atomicMax(amax_bits, bits);
}

// Folds the warp's `bits` into *amax_bits (nothing when amax_bits is null). All 32 lanes must call it.
__device__ inline void warp_raise_amax(unsigned* amax_bits, unsigned bits) {
  if (amax_bits == nullptr) return;
  bits = warp_max_bits(bits);
  if (threadIdx.x % kWarpSize == 0) raise_amax(amax_bits, bits);
}

// The word a producing kernel raises for `amax` (op's output of that name), zeroed on the stream; null when
// no amax is wanted.
inline unsigned* amax_word(const ops::AmaxOutput& amax, const char* op) {
  if (!amax.wanted()) return nullptr;
  check_tensor(amax.value, DType::kF32, op, "amax");
  NANOFORGE_CHECK(amax.value.numel() == 1, "{} on CUDA: amax {} must be one f32", op, amax.value.describe());
  NANOFORGE_CUDA_CHECK(cudaMemsetAsync(amax.value.data, 0, sizeof(unsigned), nullptr));
  return static_cast<unsigned*>(amax.value.data);
}

}  // namespace nanoforge::cuda
