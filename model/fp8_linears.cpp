// base_train's FP8 layer filter applied to the shapes of nanochat's GPT (nanochat/gpt.py's Linear layers:
// per block c_q, c_k, c_v, c_proj, mlp.c_fc, mlp.c_proj, and ve_gate on value-embedding layers; lm_head and
// smear_gate once).
#include "model/fp8_linears.h"

#include <algorithm>

#include <fmt/format.h>

namespace nanoforge {

bool fp8_linear_eligible(int64_t in_features, int64_t out_features) {
  constexpr int64_t kMultiple = 16;       // base_train: in and out features % 16 == 0
  constexpr int64_t kSmallestSide = 128;  // base_train: min(in, out) >= 128
  return in_features % kMultiple == 0 && out_features % kMultiple == 0 &&
         std::min(in_features, out_features) >= kSmallestSide;
}

Fp8Linears Fp8Linears::of(const GPTConfig& config) {
  const int64_t C = config.n_embd;
  Fp8Linears f;
  f.c_q = fp8_linear_eligible(C, config.n_head * config.head_dim());
  f.c_k = f.c_v = fp8_linear_eligible(C, config.kv_dim());
  f.c_proj = fp8_linear_eligible(C, C);
  f.mlp_fc = fp8_linear_eligible(C, config.mlp_dim());
  f.mlp_proj = fp8_linear_eligible(config.mlp_dim(), C);
  f.lm_head = fp8_linear_eligible(C, config.padded_vocab_size());
  int64_t value_embed_layers = 0;
  for (int64_t layer = 0; layer < config.n_layer; ++layer)
    value_embed_layers += config.has_value_embed(layer);
  // ve_gate (ve_gate_channels -> Hkv) and smear_gate (24 -> 1) are far below 128 on every model: never FP8.
  const int64_t per_block = f.c_q + f.c_k + f.c_v + f.c_proj + f.mlp_fc + f.mlp_proj;
  f.converted = per_block * config.n_layer + f.lm_head;
  f.linears = 6 * config.n_layer + value_embed_layers + 2;
  return f;
}

std::string Fp8Linears::summary() const {
  return fmt::format("converted {}/{} linear layers, skipped {} (too small)", converted, linears,
                     linears - converted);
}

}  // namespace nanoforge
