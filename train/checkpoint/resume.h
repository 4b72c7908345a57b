// Resuming a run: which checkpoint to start from (the newest that verifies, falling back past damaged ones
// and saying so; a --resume-from naming no directory refused as such), and whether the new recipe may
// continue the saved one — a change that would silently break the run (the model's shape, the sequence
// length, the data order) is refused; others (evaluation cadence, number of iterations, learning rates...)
// are allowed and listed.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "train/recipe.h"

namespace nanoforge {

// The newest checkpoint of RUN that verifies (verify_checkpoint: latest first, then step directories from
// newest to oldest). Each damaged one passed over — and a damaged `latest` — is added to `skipped` with its
// problem. NotFound when none was written, DataLoss when every one is damaged.
absl::StatusOr<std::string> newest_valid_checkpoint(const std::string& run_dir,
                                                    std::vector<std::string>* skipped);

// RUN/checkpoints/step_NNNNNN directories, by step, oldest first (complete or not).
std::vector<std::pair<int64_t, std::string>> checkpoint_directories(const std::string& run_dir);

// --resume-from CHECKPOINT before anything is read from it: NotFound when it is no directory, naming the
// checkpoints `run_dir` has (or saying it has none). verify_checkpoint then checks what it holds.
absl::Status check_resume_from_exists(const std::string& checkpoint, const std::string& run_dir);

// An error naming the first key that may not change; otherwise the changes as "key: old -> new".
absl::StatusOr<std::vector<std::string>> resume_changes(const Recipe& saved, const Recipe& current);

// Drops the metrics a resumed run will write again: training records after `step`, evaluations at or after
// it.
absl::Status trim_metrics_after(const std::string& metrics_path, int64_t step);

}  // namespace nanoforge
