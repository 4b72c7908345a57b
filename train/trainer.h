// The training run: everything `nanoforge train` does between reading the recipe and exiting. It composes
// the parts — tokenizer and shards (data/), the model (model/), MuonAdamW and its schedules (optim/),
// metrics, evaluation, samples and checkpoints (train/) — and nothing below train/ knows of the others.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <functional>
#include <string>

#include "train/recipe.h"

namespace nanoforge {

// What one optimizer step cost on this rank (`nanoforge bench scaling` collects them).
struct StepTiming {
  int64_t step = 0;                 // counted from 1, as printed
  int64_t tokens = 0;               // the step's tokens, all ranks together
  double seconds = 0;               // the whole step
  double exposed_comm_seconds = 0;  // waiting for gradient reductions and parameter gathers
  double data_wait_seconds = 0;     // waiting for the loader
};

struct TrainRunOptions {
  std::string run_dir;
  int64_t stop_at_step =
      -1;               // > 0: stop cleanly (with a checkpoint) after this step; the schedule is unchanged
  bool resume = false;  // continue from the newest valid checkpoint of run_dir
  std::string resume_from;  // continue from this checkpoint directory
  // Resume on other training data or another tokenizer than the checkpoint's (refused otherwise); the loader
  // then starts the new data from its beginning.
  bool allow_data_change = false;
  bool checkpoints = true;                         // false: none at all, not even at the end (benchmarks)
  std::function<void(const StepTiming&)> on_step;  // after every step, on every rank
};

absl::Status run_training(const Recipe& recipe, const TrainRunOptions& options);

}  // namespace nanoforge
