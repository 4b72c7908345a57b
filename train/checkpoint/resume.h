// Resuming a run: which checkpoint to start from (the newest that verifies, falling back past damaged ones
// and saying so), that a new run does not overwrite an old one, and whether the new recipe may continue the
// saved one — a change that would silently break the run (the model's shape, the sequence length, the data
// order) is refused; others (evaluation cadence, number of iterations, learning rates...) are allowed and
// listed.
#pragma once

#include <absl/status/statusor.h>

#include <string>
#include <vector>

#include "train/recipe.h"

namespace nanoforge {

// The newest checkpoint of RUN that verifies (verify_checkpoint: latest first, then step directories from
// newest to oldest). Each damaged one passed over — and a damaged `latest` — is added to `skipped` with its
// problem. NotFound when none was written, DataLoss when every one is damaged.
absl::StatusOr<std::string> newest_valid_checkpoint(const std::string& run_dir,
                                                    std::vector<std::string>* skipped);

// A new run (no --resume) may not start in a directory that holds one: its checkpoints, metrics and config
// would be replaced or mixed. AlreadyExists naming what is there and how to continue or start elsewhere.
absl::Status check_new_run_directory(const std::string& run_dir);

// An error naming the first key that may not change; otherwise the changes as "key: old -> new".
absl::StatusOr<std::vector<std::string>> resume_changes(const Recipe& saved, const Recipe& current);

// Drops the metrics a resumed run will write again: training records after `step`, evaluations at or after
// it.
absl::Status trim_metrics_after(const std::string& metrics_path, int64_t step);

}  // namespace nanoforge
