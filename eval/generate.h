// Text generation with the model for samples during training and `nanoforge sample`: the prompt's tokens
// (BOS first) are run through the training forward pass on one row of the model's full sequence length and
// the next token is drawn from the last position's logits — greedy at temperature 0, else softmax with
// temperature and optional top-k. There is no KV cache: each token costs one forward of sequence_len tokens,
// fine for short samples; the model is re-planned for (1, sequence_len) while generating.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/gpt.h"

namespace nanoforge {

struct SampleOptions {
  int64_t max_tokens = 16;
  double temperature = 0;  // 0: greedy
  int64_t top_k = 0;       // 0: the whole vocabulary
  uint64_t seed = 0;
  std::function<void(int32_t)> on_token;  // called with each token as it is drawn
};

// The generated ids (not including the prompt). The prompt must hold at least one token.
std::vector<int32_t> generate(GPT& model, std::span<const int32_t> prompt, const SampleOptions& options);

// nanochat's fixed sample prompts.
const std::vector<const char*>& sample_prompts();

}  // namespace nanoforge
