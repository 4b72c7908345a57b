// Typed views of every parameter (or of every gradient: same layout) of nanochat's GPT, resolved once from
// the flat buffer so the forward and backward passes do no name lookups.
#pragma once

#include <initializer_list>
#include <vector>

#include "kernels/tensor.h"
#include "model/param_layout.h"

namespace nanoforge {

struct BlockWeights {
  // The attention's input projections c_v, c_k, c_q stacked (their order in the buffer) as one
  // (2 kv_dim + q_dim, C) matrix: one GEMM computes v, k and q. c_proj (C, q_dim).
  TensorView c_vkq, c_proj;
  TensorView ve_gate, value_embed;     // value-embedding layers only: (Hkv, 12), (padded vocab, Hkv*D)
  TensorView fc, mlp_proj;             // (4C, C), (C, 4C)
  TensorView resid_lambda, x0_lambda;  // this layer's element of resid_lambdas / x0_lambdas, (1)
};

struct ModelWeights {
  TensorView wte;         // (padded vocab, C)
  TensorView lm_head;     // rows [0, vocab_size) of lm_head.weight: the padding rows never take part
  TensorView smear_gate;  // (1, 24)
  TensorView smear_lambda, backout_lambda;  // (1)
  std::vector<BlockWeights> blocks;
};

// The views as one matrix of their rows stacked; each must start where the one before it ends.
TensorView stacked_rows(std::initializer_list<TensorView> matrices);

// Views into `flat` (laid out as `layout`, holding `dtype` on `device`).
ModelWeights model_weights(const GPTConfig& config, const ParamLayout& layout, void* flat, DType dtype,
                           Device device);

}  // namespace nanoforge
