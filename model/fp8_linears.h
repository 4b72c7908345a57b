// Which of nanochat's Linear layers train in FP8 (base_train --fp8): those whose in and out features are both
// divisible by 16 (the FP8 tensor cores' requirement) and whose smaller side is at least 128 (below that the
// quantisation passes cost more than the GEMM saves). base_train applies this filter to every nn.Linear of
// the GPT; nanoforge's fused c_vkq projection is c_v, c_k and c_q, each judged and scaled on its own.
#pragma once

#include <cstdint>
#include <string>

#include "model/gpt_config.h"

namespace nanoforge {

// base_train's fp8_module_filter for one Linear of `in_features` -> `out_features`.
bool fp8_linear_eligible(int64_t in_features, int64_t out_features);

// The filter's verdict on each Linear of a model with `config`.
struct Fp8Linears {
  bool c_q = false, c_k = false, c_v = false;  // attention projections (C -> H*D, C -> Hkv*D twice)
  bool c_proj = false;                         // attention output (C -> C)
  bool mlp_fc = false, mlp_proj = false;       // MLP (C -> 4C, 4C -> C)
  bool lm_head = false;                        // C -> padded vocabulary
  int64_t converted = 0;                       // over the whole model
  int64_t linears = 0;                         // nanochat's nn.Linear count (ve_gate and smear_gate included)

  static Fp8Linears of(const GPTConfig& config);
  // "converted 121/136 linear layers, skipped 15 (too small)", as base_train prints it.
  std::string summary() const;
};

}  // namespace nanoforge
