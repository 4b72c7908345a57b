// How CORE results are shown and kept: one progress line per task, nanochat's table (Task, Accuracy,
// Centered, then CORE), its JSON record ({"results", "centered_results", "core_metric"}, floats as Python's
// repr writes them), and the per-run JSON file, which adds what was evaluated and each example's result.
#pragma once

#include <absl/status/status.h>

#include <string>

#include "eval/core/core_eval.h"

namespace nanoforge {

std::string core_task_line(const CoreTaskResult& task);
std::string core_table(const CoreResults& results);
std::string core_json(const CoreResults& results);

struct CoreRunInfo {
  std::string checkpoint, bundle, device;
  int64_t step = 0, max_per_task = -1, world_size = 1;
};
// Writes core_json's fields plus `info` and "correct": {label: [0/1 per example, evaluation order]} to
// PATH (through a temporary file, renamed).
absl::Status write_core_file(const std::string& path, const CoreResults& results, const CoreRunInfo& info);

}  // namespace nanoforge
