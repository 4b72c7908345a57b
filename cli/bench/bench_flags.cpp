// The benchmarks' shared flags (bench_flags.h), with their ranges.
#include "cli/bench/bench_flags.h"

#include <absl/flags/flag.h>
#include <fmt/format.h>

#include "cli/flag_limits.h"

ABSL_FLAG(int64_t, depth, 4, "model depth; dimensions derived as nanochat's base_train does");
NANOFORGE_FLAG_LIMIT(depth, 1, nanoforge::kMaxLayers);
ABSL_FLAG(int64_t, seq, 256, "sequence length T (the model's sequence_len)");
NANOFORGE_FLAG_LIMIT(seq, 2, nanoforge::kMaxSequenceLen);
ABSL_FLAG(int64_t, batch, 8, "rows per step B");
NANOFORGE_FLAG_LIMIT(batch, 1, 1 << 20);
ABSL_FLAG(std::string, window_pattern, "SSSL",
          "attention windows per layer, S(hort) / L(ong), tiled; last layer L");
ABSL_FLAG(int64_t, aspect_ratio, 64, "model dim = depth * aspect_ratio, rounded up to the head dim");
NANOFORGE_FLAG_LIMIT(aspect_ratio, 1, nanoforge::kMaxEmbd);
ABSL_FLAG(int64_t, head_dim, 128, "attention head dimension");
NANOFORGE_FLAG_LIMIT(head_dim, 2, nanoforge::kMaxEmbd);
ABSL_FLAG(int64_t, vocab, 32768, "vocabulary size");
NANOFORGE_FLAG_LIMIT(vocab, 1, nanoforge::kMaxVocabSize);
ABSL_FLAG(std::string, attention, "",
          "bench step, on the GPU (or --gpu with --model-only): auto (unset: the trainer's choice; with "
          "--model-only cudnn on every sm_90+ GPU of the table, where a real build has cuDNN 9), flash or "
          "cudnn; bench attention: both (unset), flash or cudnn");
ABSL_FLAG(int32_t, steps, 10, "timed steps (the median is reported)");
NANOFORGE_FLAG_LIMIT(steps, 1, 1e6);
ABSL_FLAG(int32_t, warmup, 2, "untimed steps first");
NANOFORGE_FLAG_LIMIT(warmup, 0, 1e6);

namespace nanoforge {

std::vector<std::string> flag_list(std::initializer_list<std::vector<std::string>> groups) {
  std::vector<std::string> names;
  for (const std::vector<std::string>& group : groups)
    names.insert(names.end(), group.begin(), group.end());
  return names;
}

absl::StatusOr<GPTConfig> model_from_flags(int64_t vocab) {
  const GPTConfig config = GPTConfig::from_sizing({.depth = absl::GetFlag(FLAGS_depth),
                                                   .aspect_ratio = absl::GetFlag(FLAGS_aspect_ratio),
                                                   .head_dim = absl::GetFlag(FLAGS_head_dim),
                                                   .max_seq_len = absl::GetFlag(FLAGS_seq),
                                                   .window_pattern = absl::GetFlag(FLAGS_window_pattern)},
                                                  vocab);
  if (absl::Status valid = config.validate(); !valid.ok()) {
    return absl::InvalidArgumentError(fmt::format("model from the flags: {}", std::string(valid.message())));
  }
  return config;
}

}  // namespace nanoforge
