// The training run: everything `nanoforge train` does between reading the recipe and exiting. It composes
// the parts — tokenizer and shards (data/), the model (model/), MuonAdamW and its schedules (optim/),
// metrics, evaluation, samples and checkpoints (train/) — and nothing below train/ knows of the others.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

#include "train/recipe.h"

namespace nanoforge {

struct TrainRunOptions {
  std::string run_dir;
  int64_t stop_at_step =
      -1;               // > 0: stop cleanly (with a checkpoint) after this step; the schedule is unchanged
  bool resume = false;  // continue from the newest valid checkpoint of run_dir
  std::string resume_from;  // continue from this checkpoint directory
};

absl::Status run_training(const Recipe& recipe, const TrainRunOptions& options);

}  // namespace nanoforge
