// Typed views of every parameter (or of every gradient: same layout) of nanochat's GPT, resolved once from
// the flat buffer so the forward and backward passes do no name lookups.
#pragma once

#include <vector>

#include "kernels/tensor.h"
#include "model/param_layout.h"

namespace nanoforge {

struct BlockWeights {
  TensorView c_q, c_k, c_v, c_proj;    // attention projections, (out, in)
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

// Views into `flat` (laid out as `layout`, holding `dtype` on `device`).
ModelWeights model_weights(const GPTConfig& config, const ParamLayout& layout, void* flat, DType dtype,
                           Device device);

}  // namespace nanoforge
