// Flags several benchmarks share, in groups, each flag defined once in bench_flags.cpp (absl flags are
// process-wide) and declared here: the model and step a benchmark builds (nanochat's sizing of --depth, as
// GPTConfig::from_sizing takes it), the GPU attention, and the timing of steps. A command lists a group by
// its name list instead of repeating the flags' names.
#pragma once

#include <absl/flags/declare.h>
#include <absl/status/statusor.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "model/gpt_config.h"

// The step's size: the model's depth, the sequence length and the rows per step.
ABSL_DECLARE_FLAG(int64_t, depth);
ABSL_DECLARE_FLAG(int64_t, seq);
ABSL_DECLARE_FLAG(int64_t, batch);
// The model's shape beyond its depth, and its vocabulary.
ABSL_DECLARE_FLAG(std::string, window_pattern);
ABSL_DECLARE_FLAG(int64_t, aspect_ratio);
ABSL_DECLARE_FLAG(int64_t, head_dim);
ABSL_DECLARE_FLAG(int64_t, vocab);
// The GPU attention (bench step: auto, flash or cudnn; bench attention: both, flash or cudnn).
ABSL_DECLARE_FLAG(std::string, attention);
// Timed steps, after untimed warm-up ones.
ABSL_DECLARE_FLAG(int32_t, steps);
ABSL_DECLARE_FLAG(int32_t, warmup);

namespace nanoforge {

inline const std::vector<std::string> kStepSizeFlags = {"depth", "seq", "batch"};
inline const std::vector<std::string> kModelShapeFlags = {"window_pattern", "aspect_ratio", "head_dim"};
inline const std::vector<std::string> kTimingFlags = {"steps", "warmup"};

// A command's flag list: the groups and single names in the order given (the order --help shows them in).
std::vector<std::string> flag_list(std::initializer_list<std::vector<std::string>> groups);

// The model of --depth, --seq, --window-pattern, --aspect-ratio and --head-dim with `vocab` tokens, checked
// (an error names "model from the flags").
absl::StatusOr<GPTConfig> model_from_flags(int64_t vocab);

}  // namespace nanoforge
