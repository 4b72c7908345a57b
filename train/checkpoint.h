// Run checkpoints: RUN/checkpoints/step_NNNNNN/ holds model.h5 (every parameter in fp32 under its nanochat
// state-dict name, the config as attributes), optimizer.h5 (MuonAdamW's state per parameter, with global
// shapes) and trainer.h5 (step, data-loader state, resolved recipe, tokenizer hash, version and commit);
// every dataset carries a Fletcher-32 checksum. A checkpoint is written into a temporary directory, fsync'd
// and renamed into place, and RUN/checkpoints/latest (the directory's name) is replaced atomically
// afterwards, so `latest` always names a complete checkpoint. Layout: docs/checkpoints.md.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "data/loader.h"
#include "model/gpt.h"
#include "optim/muon_adamw.h"
#include "train/recipe.h"

namespace nanoforge {

struct TrainerState {
  int64_t step = 0;                   // optimizer steps done
  std::vector<uint8_t> loader_state;  // LoaderState::to_bytes()
  std::string recipe_toml;            // the resolved recipe of the run
  std::string tokenizer_hash;
  std::string nanoforge_version, git_commit;
  double training_seconds = 0;
};

std::string checkpoint_name(int64_t step);  // "step_000500"

absl::Status save_checkpoint(const std::string& run_dir, const GPT& model, const MuonAdamW& optimizer,
                             const TrainerState& trainer);

// The checkpoint `latest` names, as a directory path; NotFound when the run has none.
absl::StatusOr<std::string> latest_checkpoint(const std::string& run_dir);

// The model config stored in CHECKPOINT/model.h5.
absl::StatusOr<GPTConfig> read_checkpoint_config(const std::string& checkpoint_dir);
// Loads CHECKPOINT/model.h5 into `model` (whose config must be the stored one).
absl::Status load_model_weights(const std::string& checkpoint_dir, GPT& model);
absl::Status load_optimizer_state(const std::string& checkpoint_dir, MuonAdamW& optimizer);
absl::StatusOr<TrainerState> read_trainer_state(const std::string& checkpoint_dir);

}  // namespace nanoforge
