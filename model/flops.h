// nanochat's estimate of training FLOPs per token (forward + backward): 6 per weight of every Linear
// (block matrices including ve_gate, lm_head, smear_gate; not the embeddings) plus 12 * H * D * min(w, T)
// per layer for attention, w being the layer's window. The one formula behind GFLOP/s and MFU.
#pragma once

#include <cstdint>

#include "model/gpt_config.h"

namespace nanoforge {

int64_t matmul_params(const GPTConfig& config);
int64_t flops_per_token(const GPTConfig& config);

}  // namespace nanoforge
