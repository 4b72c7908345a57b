// Turning a validated recipe into the concrete pieces of a run, with every check done before any training
// work starts: the tokenizer, the train and val shards (checked against the tokenizer), the model's
// dimensions, the horizon and the gradient accumulation. Each error names the recipe key that would fix it.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/shards/shard_set.h"
#include "data/tokenizer/tokenizer.h"
#include "kernels/kernel_settings.h"
#include "kernels/tensor.h"
#include "model/gpt_config.h"
#include "model/param_layout.h"
#include "optim/param_groups.h"
#include "optim/schedules.h"
#include "optim/training_horizon.h"
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

// What the command asks of a run besides its recipe.
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

// Everything the trainer reads: the recipe it was made from and what follows from it. The trainer reads
// settings from here only, so a value has one source.
struct RunSetup {
  RunSetup(Recipe recipe_in, Tokenizer tokenizer_in)
      : recipe(std::move(recipe_in)), tokenizer(std::move(tokenizer_in)) {}
  Recipe recipe;  // validated; what config.toml and checkpoints record
  Tokenizer tokenizer;
  std::shared_ptr<const ShardSet> train_data, val_data;
  std::string
      train_manifest_hash;  // data.train's manifest (data/shards/shard_manifest.h); "" when none applies
  GPTConfig model;
  std::unique_ptr<const ParamLayout> layout;  // the model's parameters (param_groups point into it)
  std::vector<ParamGroup> param_groups;       // nanochat's groups, with the horizon's lr and decay scaling
  TrainingHorizon horizon;
  ScheduleConfig schedule;
  int64_t world_size = 1;
  int64_t device_batch_size = 1;        // B: rows per micro-batch and rank (train.device_batch_size)
  int64_t grad_accum_steps = 1;         // micro-batches per optimizer step and rank
  int64_t eval_steps = 0;               // validation batches per evaluation
  Device device = Device::kCpu;         // where the model, its gradients and the optimizer state live
  std::string device_name;              // what MFU is computed against ("cpu", "NVIDIA H200")
  bool on_cuda_emulator = false;        // device is the CPU emulator of CUDA (nanoforge-emulated)
  ops::KernelSettings kernel_settings;  // the kernels the model runs, chosen once from the recipe and device
};

// train.device resolved: auto means cuda when this build has the CUDA backend and a real GPU is visible, else
// cpu (the CPU emulator of CUDA is never chosen: only train.device = cuda runs on it); cuda without a usable
// GPU is an error saying why.
absl::StatusOr<Device> resolve_train_device(const Recipe& recipe);

// `recipe` has passed validate_recipe.
absl::StatusOr<RunSetup> set_up_run(const Recipe& recipe, int64_t world_size, Device device);

}  // namespace nanoforge
