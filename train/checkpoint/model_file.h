// Loading a checkpoint for inference (`nanoforge sample`, `nanoforge eval`): the model with its weights and
// the run's tokenizer — the one the recipe names unless another directory is given — checked against the hash
// the run trained with. PATH may be a checkpoint directory or a run directory (its latest checkpoint).
#pragma once

#include <absl/status/statusor.h>

#include <memory>
#include <string>

#include "data/tokenizer/tokenizer.h"
#include "model/gpt.h"
#include "train/checkpoint/checkpoint.h"
#include "train/recipe.h"

namespace nanoforge {

struct CheckpointModel {
  std::string checkpoint_dir;
  TrainerState trainer;
  Recipe recipe;
  Tokenizer tokenizer;
  std::unique_ptr<GPT> model;
};

absl::StatusOr<std::string> resolve_checkpoint(const std::string& path);
// The model lives on `device` (on a GPU in mixed precision, its bf16 GEMM copy made).
absl::StatusOr<CheckpointModel> load_checkpoint_model(const std::string& path,
                                                      const std::string& tokenizer_dir,
                                                      Device device = Device::kCpu);

}  // namespace nanoforge
