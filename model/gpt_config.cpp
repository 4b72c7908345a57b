// GPTConfig derivations and validation, following nanochat's gpt.py and base_train.py.
#include "model/gpt_config.h"

#include <fmt/format.h>

#include <tuple>

namespace nanoforge {

GPTConfig GPTConfig::from_sizing(const ModelSizing& sizing, int64_t vocab_size) {
  GPTConfig config;
  config.n_layer = sizing.depth;
  config.vocab_size = vocab_size;
  config.sequence_len = sizing.max_seq_len;
  config.window_pattern = sizing.window_pattern;
  const int64_t base_dim = sizing.depth * sizing.aspect_ratio, head_dim = sizing.head_dim;
  config.n_embd = head_dim > 0 ? (base_dim + head_dim - 1) / head_dim * head_dim : base_dim;
  config.n_head = head_dim > 0 ? config.n_embd / head_dim : 0;
  config.n_kv_head = config.n_head;
  return config;
}

GPTConfig GPTConfig::from_depth(int64_t depth, int64_t vocab_size, int64_t sequence_len) {
  return from_sizing({.depth = depth, .max_seq_len = sequence_len}, vocab_size);
}

absl::Status GPTConfig::validate() const {
  auto invalid = [](std::string message) { return absl::InvalidArgumentError(std::move(message)); };
  for (const auto& [name, value, limit] : {std::tuple{"n_layer", n_layer, kMaxLayers},
                                           {"n_embd", n_embd, kMaxEmbd},
                                           {"n_head", n_head, kMaxEmbd},
                                           {"vocab_size", vocab_size, kMaxVocabSize},
                                           {"sequence_len", sequence_len, kMaxSequenceLen}}) {
    if (value > limit)
      return invalid(fmt::format("{} {} exceeds nanoforge's limit of {}", name, value, limit));
  }
  if (n_layer < 1) return invalid(fmt::format("n_layer must be at least 1, got {}", n_layer));
  if (n_head < 1 || n_kv_head < 1) {
    return invalid(fmt::format("n_head and n_kv_head must be at least 1, got {} and {}", n_head, n_kv_head));
  }
  if (n_embd % n_head != 0) {
    return invalid(fmt::format("n_embd {} must be divisible by n_head {}", n_embd, n_head));
  }
  if (n_head % n_kv_head != 0) {
    return invalid(
        fmt::format("n_head {} must be a multiple of n_kv_head {} (GQA groups)", n_head, n_kv_head));
  }
  if (head_dim() % 2 != 0) {
    return invalid(fmt::format("head dim n_embd/n_head = {} must be even for rotary embeddings", head_dim()));
  }
  if (n_embd < kSmearGateChannels) {
    return invalid(fmt::format("n_embd {} must be at least {} (the smear gate reads that many channels)",
                               n_embd, kSmearGateChannels));
  }
  if (n_kv_head > 32) {
    return invalid(fmt::format("n_kv_head {} exceeds the supported 32", n_kv_head));
  }
  if (vocab_size < 1) return invalid(fmt::format("vocab_size must be positive, got {}", vocab_size));
  if (sequence_len < 2) {
    return invalid(fmt::format("sequence_len must be at least 2 (smear mixes neighbouring tokens), got {}",
                               sequence_len));
  }
  if (window_pattern.empty() || window_pattern.size() > static_cast<size_t>(kMaxLayers) ||
      window_pattern.find_first_not_of("SL") != std::string::npos) {
    return invalid(fmt::format("window_pattern '{}' must be a string of 1 to {} S and L",
                               window_pattern.substr(0, 80), kMaxLayers));
  }
  return absl::OkStatus();
}

int64_t GPTConfig::short_window() const {
  const int64_t quarter = (sequence_len + 3) / 4;
  return (quarter + 127) / 128 * 128;
}

int64_t GPTConfig::window(int64_t layer) const {
  if (layer == n_layer - 1) return sequence_len;
  const char kind = window_pattern[static_cast<size_t>(layer) % window_pattern.size()];
  return kind == 'L' ? sequence_len : short_window();
}

std::string GPTConfig::describe() const {
  return fmt::format(
      "n_layer={} n_embd={} n_head={} n_kv_head={} head_dim={} vocab_size={} (padded {}) sequence_len={} "
      "window_pattern={}",
      n_layer, n_embd, n_head, n_kv_head, head_dim(), vocab_size, padded_vocab_size(), sequence_len,
      window_pattern);
}

}  // namespace nanoforge
