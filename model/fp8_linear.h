// The three GEMMs of a Linear layer in FP8, as nanochat's fp8.py runs them (tensorwise scales): forward
// y = x W^T with x and W in e4m3; backward d_x = d_y W and d_W += d_y^T x with d_y in e5m2 and x, W the
// forward's e4m3 codes again. The operands go through ops::fp8_quantize into K-major layouts (what FP8
// tensor cores take) and ops::fp8_matmul. A weight may hold several nanochat Linears (c_vkq is c_v, c_k and
// c_q): each segment of rows gets its own scales, and a segment the filter left out runs in full precision.
// The forward pass keeps each operand's amax for the backward pass (kernels/fp8_amax.h): the same tensors
// give the same amax, so the backward quantises x and W in one pass each instead of two.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "model/fp8_linears.h"

namespace nanoforge {

// Rows [first_row, first_row + rows) of a weight: one nanochat Linear, in FP8 or not.
struct LinearSegment {
  int64_t first_row = 0;
  int64_t rows = 0;
  bool fp8 = false;
};

// Where one Linear keeps the amax of its operands from its forward pass to its backward pass: x's, and one
// per weight segment; (1) f32 views on the model's device.
struct Fp8AmaxSlots {
  static constexpr int kMaxSegments = 3;  // c_vkq: c_v, c_k, c_q
  TensorView x;
  std::array<TensorView, kMaxSegments> weight;
};

// The Linears of a block, in the order of their amax slots; lm_head's follow the last block's.
enum class BlockLinear : int64_t { kVkq, kAttentionProj, kMlpFc, kMlpProj, kCount };

// Scratch of the FP8 GEMMs, planned with the activations (model/activations.cpp) when the model trains in
// FP8: 1-D byte views big enough for any converted Linear's operands, the three inverse scales, and a dense
// buffer for a full-precision segment's columns.
struct Fp8Scratch {
  TensorView x_codes, x_codes_transposed;            // the input: (N, in) and (in, N)
  TensorView w_codes;                                // the weight: (out, in) or (in, out)
  TensorView g_codes, g_codes_transposed;            // the output gradient: (N, out) and (out, N)
  TensorView x_inv_scale, w_inv_scale, g_inv_scale;  // (1) f32 each
  TensorView g_amax;                                 // (1) f32: the output gradient's amax
  TensorView columns;                                // (N, widest full-precision segment), activation dtype
  // (N, padded vocabulary), activation dtype, when the vocabulary is padded: lm_head's FP8 GEMMs run over the
  // padded rows, as nanochat's (its weight scales cover them; the backward's K must be a multiple of 16).
  TensorView padded_logits;
  // (n_layer * BlockLinear::kCount + 1, 1 + kMaxSegments) f32: every Linear's amax slots, block by block,
  // then lm_head's.
  TensorView amax;
  bool planned() const { return x_codes.data != nullptr || x_inv_scale.data != nullptr; }
  // The slots of a block's Linear, and lm_head's; empty views while nothing is planned.
  Fp8AmaxSlots block_amax(int64_t layer, BlockLinear linear) const;
  Fp8AmaxSlots lm_head_amax() const;
};

// Whether any segment runs in FP8.
bool any_fp8(std::span<const LinearSegment> segments);

// Takes the scratch for N = rows token rows from `arena` (a measuring arena counts it).
void plan_fp8_scratch(const GPTConfig& config, const Fp8Linears& linears, int64_t rows, ArenaAllocator& arena,
                      Fp8Scratch& scratch);

// y (N, out) = x (N, in) W^T, written or added, segment by segment. x_amax: kGiven when the op that produced
// x wrote its amax to amax.x (ops::AmaxOutput), kCompute to take it here; the weights' amax are taken here.
// Either way they are in `amax` afterwards, for the backward pass.
void fp8_linear_forward(const Fp8Scratch& scratch, const Fp8AmaxSlots& amax, ops::Fp8Amax x_amax,
                        TensorView y, TensorView x, TensorView weight,
                        std::span<const LinearSegment> segments, ops::Accumulate mode);

// The MLP's fc Linear in FP8 with nanochat's activation: act (N, out) = relu(x W^T)^2, x's amax given (the
// norm before the MLP took it), through ops::fp8_linear_relu_squared_forward (our fused GEMM where the
// settings choose it), which writes act's amax to act_amax when wanted: the next Linear's input.
void fp8_mlp_fc_forward(const Fp8Scratch& scratch, const Fp8AmaxSlots& amax, ops::AmaxOutput act_amax,
                        TensorView act, TensorView x, TensorView weight, const ops::KernelSettings& settings);

// What a Linear's input x is: plain, or the MLP's act = relu(pre)^2, whose backward then gives pre's
// gradient.
enum class Fp8Input { kPlain, kReluSquared };

// d_x (N, in) = d_y W (written or added) and d_weight (out, in) += d_y^T x, segment by segment, with x's and
// the weights' amax as the forward pass of the same x and weight left them in `amax`. With x_is kReluSquared
// (one FP8 weight, d_x written), d_x is pre's gradient, d_y W times 2 sqrt(act), in one op
// (ops::fp8_relu_squared_linear_backward, our fused GEMM where the settings choose it).
void fp8_linear_backward(const Fp8Scratch& scratch, const Fp8AmaxSlots& amax, TensorView d_x,
                         ops::Accumulate mode, TensorView d_weight, TensorView d_y, TensorView x,
                         Fp8Input x_is, TensorView weight, std::span<const LinearSegment> segments,
                         const ops::KernelSettings& settings);

}  // namespace nanoforge
