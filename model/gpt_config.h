// GPTConfig: the dimensions of nanochat's GPT, given explicitly or derived from a depth the way nanochat's
// base_train sizes its models, plus everything that follows from them (head dim, padded vocab, per-layer
// attention windows, value-embedding layers, the backout layer). All model code reads shapes from here.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge {

// How nanochat's base_train sizes a model from its depth: its command-line flags with their defaults, and the
// [model] section of a recipe. The vocabulary comes from the tokenizer.
struct ModelSizing {
  int64_t depth = 20;
  int64_t aspect_ratio = 64;  // model dim = depth * aspect_ratio, rounded up to a multiple of head_dim
  int64_t head_dim = 128;
  int64_t max_seq_len = 2048;
  std::string window_pattern = "SSSL";  // S short, L long; tiled over the layers
};

// nanochat's rotary_seq_len = sequence_len * 10: the rotary tables' length, so the longest sequence.
inline constexpr int64_t kRotaryLengthFactor = 10;

// The model's dimensions; the defaults are those of nanochat's GPTConfig dataclass.
struct GPTConfig {
  int64_t sequence_len = 2048;
  int64_t vocab_size = 32768;
  int64_t n_layer = 12;
  int64_t n_head = 6;
  int64_t n_kv_head = 6;
  int64_t n_embd = 768;
  std::string window_pattern = "SSSL";

  // nanochat's base_train sizing: model dim = depth * aspect_ratio rounded up to a multiple of head_dim,
  // heads = dim / head_dim, no GQA.
  static GPTConfig from_sizing(const ModelSizing& sizing, int64_t vocab_size);
  // from_sizing with base_train's defaults but for the depth and the sequence length.
  static GPTConfig from_depth(int64_t depth, int64_t vocab_size, int64_t sequence_len);

  // Checks every constraint the model relies on; the message names the field and what would fix it.
  absl::Status validate() const;

  int64_t head_dim() const { return n_embd / n_head; }
  int64_t kv_dim() const { return n_kv_head * head_dim(); }
  int64_t mlp_dim() const { return 4 * n_embd; }
  // Embedding and lm_head rows: vocab rounded up to a multiple of 64 (nanochat pads for efficiency).
  int64_t padded_vocab_size() const { return (vocab_size + 63) / 64 * 64; }
  // Attention window of layer i (a query at t sees keys t - window .. t): the long window is sequence_len,
  // the short one ceil(ceil(sequence_len / 4) / 128) * 128; the pattern tiles the layers and the last layer
  // is always long.
  int64_t window(int64_t layer) const;
  int64_t short_window() const;
  // The longest sequence the model forwards: nanochat precomputes its rotary tables for 10 x sequence_len
  // (rotary_seq_len) and evaluates prompts up to that length (CORE); training rows are sequence_len.
  int64_t max_positions() const { return kRotaryLengthFactor * sequence_len; }
  // Layers with a value embedding: alternate layers ending with the last one (nanochat's has_ve).
  bool has_value_embed(int64_t layer) const { return layer % 2 == (n_layer - 1) % 2; }
  // The block whose output is subtracted (times backout_lambda) before the final norm.
  int64_t backout_layer() const { return n_layer / 2; }

  std::string describe() const;
};

// Upper limits on a config, far above any model nanoforge trains (nanochat's largest: 32 layers, 2048 wide,
// 65,536 tokens, 2,048 positions) and low enough that every size computed from them fits in 64 bits: a file
// or recipe claiming more is refused before anything is allocated for it.
inline constexpr int64_t kMaxLayers = 1000;
inline constexpr int64_t kMaxEmbd = 65536;
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;
inline constexpr int64_t kMaxSequenceLen = int64_t{1} << 20;

// nanochat's fixed architecture constants.
inline constexpr int64_t kSmearGateChannels = 24;  // smear_gate reads x[..., :24]
inline constexpr int64_t kValueGateChannels = 12;  // ve_gate reads x[..., :12]
inline constexpr double kQKNormScale = 1.2;        // q, k *= 1.2 after the QK RMSNorm
inline constexpr double kLogitSoftcap = 15.0;      // logits = 15 * tanh(logits / 15)
inline constexpr double kRotaryBase = 100000.0;    // rotary inv_freq = 1 / base^(2j / D)

}  // namespace nanoforge
