// flops_per_token as nanochat's estimate_flops computes it (the intended count: HEAD's fp8 path undercounts).
#include "model/flops.h"

#include <algorithm>

#include "model/param_layout.h"

namespace nanoforge {

int64_t matmul_params(const GPTConfig& config) {
  const ParamCounts counts = ParamLayout(config).counts();
  return counts.transformer_matrices + counts.lm_head + kSmearGateChannels;
}

int64_t flops_per_token(const GPTConfig& config) {
  int64_t attention = 0;
  for (int64_t layer = 0; layer < config.n_layer; ++layer) {
    attention += 12 * config.n_head * config.head_dim() * std::min(config.window(layer), config.sequence_len);
  }
  return 6 * matmul_params(config) + attention;
}

}  // namespace nanoforge
