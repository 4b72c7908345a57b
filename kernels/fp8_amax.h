// How the tensorwise amax of an FP8 GEMM operand (max |x| over the whole tensor, nanochat's fp8.py) reaches
// ops::fp8_quantize. Computing it is a read of the tensor on its own, as long as the quantisation itself: the
// kernel that produces the tensor (the RMSNorms before the projections, the MLP's ReLU²) can take the max of
// what it writes for almost nothing, and the backward pass can reuse the forward's amax of the same tensor.
// The result is the same bits either way: a max does not depend on the order it is taken in.
#pragma once

#include "kernels/tensor.h"

namespace nanoforge::ops {

// kCompute: fp8_quantize takes the max itself and writes it to its amax tensor; kGiven: the amax tensor
// already holds it (written by the producing op, or by an earlier quantisation of the same tensor).
enum class Fp8Amax : bool { kCompute, kGiven };

// The amax output of an op that produces an FP8 GEMM's input: (1) f32 on the op's device, set to max |out|
// over everything the op wrote (as rounded to out's dtype; NaN if any output is NaN). An empty value (the
// default) asks for nothing.
struct AmaxOutput {
  TensorView value;
  bool wanted() const { return value.data != nullptr; }
};

}  // namespace nanoforge::ops
