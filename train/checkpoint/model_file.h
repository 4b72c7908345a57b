// Loading a checkpoint for inference (`nanoforge sample`, `nanoforge eval`): the model with its weights and
// the run's tokenizer — the one the recipe names unless another directory is given — checked against the hash
// the run trained with. PATH may be a checkpoint directory or a run directory (its latest checkpoint).
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
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

// What the caller will run the model on: rows per forward pass and the setting that chose them (named in
// the error when the model and those rows do not fit in memory).
struct InferenceBatch {
  int64_t rows = 1;
  std::string setting = "the model";
};

// The model lives on `device` (on a GPU in mixed precision, its bf16 GEMM copy made). The checkpoint's files
// are checked against its manifest first; the model's size against model.h5's (its weights must be in it)
// and, with `batch` rows of sequence_len tokens, against the device's free memory, before it is allocated.
absl::StatusOr<CheckpointModel> load_checkpoint_model(const std::string& path,
                                                      const std::string& tokenizer_dir,
                                                      Device device = Device::kCpu,
                                                      const InferenceBatch& batch = {});

}  // namespace nanoforge
