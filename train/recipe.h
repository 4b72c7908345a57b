// A training recipe: every setting of a run, in TOML sections [model] [data] [train] [optim] [checkpoint]
// [dist] [log], with nanochat's base_train defaults. The schema is the field table in recipe.cpp: parsing,
// `section.key=value` overrides, the resolved config.toml and `nanoforge train --help` all come from it, so a
// key exists in one place. Errors name the file, the key and what would fix it.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "eval/core/core_schedule.h"
#include "model/gpt_config.h"
#include "optim/param_groups.h"
#include "optim/schedules.h"
#include "optim/training_horizon.h"

namespace nanoforge {

// The sections are the parts' own settings structs, so each default is written once, where it belongs:
// [model] is model/'s ModelSizing, [optim] optim/'s OptimizerHyperparameters, and [train] holds optim/'s
// horizon and schedule settings beside the loop's own.
struct Recipe {
  struct Model : ModelSizing {
    // a model.h5 (or checkpoint / run directory) to start from instead of the seeded init
    std::string init_from;
    // GPU attention kernels: auto, cudnn or flash (step/kernel_choice.h)
    std::string attention = "auto";
    // the GPU's MLP GEMMs: auto, cublaslt or fused (step/kernel_choice.h)
    std::string mlp_gemm = "auto";
    // nanochat's --fp8: FP8 GEMMs in the Linears base_train's filter accepts (step/kernel_choice.h)
    bool fp8 = false;
    std::string fp8_recipe = "tensorwise";  // --fp8-recipe
  } model;
  struct Data {
    std::string train;      // shard directory (or one shard file) for training
    std::string val;        // shard directory (or file) for validation
    std::string tokenizer;  // tokenizer directory (vocab size, BOS, token bytes for bits per byte)
  } data;
  struct Train {
    int64_t device_batch_size = 32;
    HorizonOptions horizon;  // train.total_batch_size, num_iterations, target_flops, target_param_data_ratio
    ScheduleShape schedule;  // train.warmup_steps, warmdown_ratio, final_lr_frac
    int64_t seed = 42;
    int64_t eval_every = 250;
    int64_t eval_tokens = 80 * 524288;
    int64_t sample_every = 2000;
    int64_t sample_tokens = 16;
    CoreSchedule core;            // train.core_every, core_bundle, core_max_per_task
    std::string device = "auto";  // auto, cpu, cuda
    int64_t threads = 0;          // CPU threads (0: all)
    bool deterministic = false;   // GPU kernels reduce in a fixed order (KernelSettings::deterministic,
                                  // kernels/kernel_settings.h)
  } train;
  OptimizerHyperparameters optim;
  struct Checkpoint {
    int64_t every = -1;       // steps between checkpoints; -1: only at the end
    int64_t keep_last = -1;   // keep the newest K checkpoints (-1: all)
    int64_t keep_every = -1;  // ... and every one whose step is a multiple of M
  } checkpoint;
  struct Dist {
    double timeout_seconds = 300;  // a rank that hears nothing from the others this long gives up
    double bucket_mb = 25;  // gradient bucket size for the overlapped reduce-scatter (PyTorch DDP's default)
  } dist;
  // Where rank 0's metrics sidecar forwards metrics.jsonl while the run trains (train/metrics_sidecar.h).
  struct Log {
    std::string wandb_project;          // empty: no Weights & Biases
    std::string wandb_run;              // empty: the run directory's name
    std::string wandb_mode = "online";  // online, offline or disabled; WANDB_MODE overrides it
    bool tensorboard = false;           // event files under RUN_DIR/tensorboard/
  } log;
};

// One key of the schema, for help texts and the resolved config.
struct RecipeKey {
  std::string name;   // "train.device_batch_size"
  std::string type;   // "integer", "float", "string"
  std::string value;  // current value as TOML
  std::string help;
};

// Parses a recipe file; unknown sections or keys and wrong types are errors naming the file and the key.
absl::StatusOr<Recipe> read_recipe(const std::string& path);
absl::StatusOr<Recipe> parse_recipe(const std::string& toml_text, const std::string& source_name);
// Applies `section.key=value` overrides (value in TOML syntax; a bare word is taken as a string).
absl::Status apply_overrides(Recipe& recipe, const std::vector<std::string>& overrides);
// A run's recipe: the file, then the overrides, then data.train, data.val and data.tokenizer still unset
// from the base directory (support/base_dir.h: $NANOFORGE_BASE_DIR/shards and /tokenizer), so that
// config.toml and the checkpoints record the paths the run read.
absl::StatusOr<Recipe> load_recipe(const std::string& path, const std::vector<std::string>& overrides);
// Checks the recipe's values on their own, before anything is allocated from them: every size within
// nanoforge's limits (named in the message), every number finite, fractions in range, keys that need each
// other.
absl::Status validate_recipe(const Recipe& recipe);
// The keys with their current values (schema order).
std::vector<RecipeKey> recipe_keys(const Recipe& recipe);
// The recipe as a TOML document (the resolved config.toml of a run).
std::string recipe_to_toml(const Recipe& recipe);

}  // namespace nanoforge
