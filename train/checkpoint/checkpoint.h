// Run checkpoints: RUN/checkpoints/step_NNNNNN/ holds model.h5 (every parameter in fp32 under its nanochat
// state-dict name, the config as attributes), optimizer.h5 (MuonAdamW's state per parameter, with the rows
// of the global tensor each dataset holds), trainer.h5 (step, data-loader state, resolved recipe, tokenizer
// hash, version and commit, as checksummed datasets) and manifest.txt (each file's size and CRC-32, checked
// before libhdf5 reads a byte). Saving is split in two: take_snapshot copies everything to host memory (the
// only part that stalls training), write_checkpoint serialises a snapshot — into a temporary directory,
// fsync'd and renamed into place, after which RUN/checkpoints/latest is replaced atomically — so `latest`
// always names a complete checkpoint. Layout: docs/checkpoints.md.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/loader/loader.h"
#include "model/gpt.h"
#include "optim/named_tensor.h"
#include "train/recipe.h"

namespace nanoforge {

struct TrainerState {
  int64_t step = 0;                   // optimizer steps done
  std::vector<uint8_t> loader_state;  // LoaderState::to_bytes()
  std::string recipe_toml;            // the resolved recipe of the run
  std::string tokenizer_hash;
  // The training data's manifest hash (data/shards/shard_manifest.h; "" for data without a manifest, and in
  // checkpoints written before manifests): resume refuses other data unless told to continue on it.
  std::string data_manifest_hash;
  std::string nanoforge_version, git_commit;  // filled in when written
  double training_seconds = 0;
};

// A host copy of everything a checkpoint holds.
struct CheckpointSnapshot {
  GPTConfig config;
  std::vector<NamedTensor> weights;          // "/weights/<name>", state-dict order
  std::vector<NamedTensor> optimizer_state;  // "/state/<name>/<key>", filled by the optimizer
  int64_t optimizer_steps = 0;
  TrainerState trainer;
  int64_t bytes() const;
};

std::string checkpoint_name(int64_t step);  // "step_000500"; step >= 0

// Copies the model's weights and `trainer` into `snapshot`, reusing its buffers when it already holds a
// snapshot of the same model (no allocation, no page faults: the copy is all the stall there is). The
// optimizer state is gathered into snapshot.optimizer_state by the optimizer itself
// (DataParallelOptimizer::gather_state).
void take_model_snapshot(const GPT& model, TrainerState trainer, CheckpointSnapshot& snapshot);
// Refuses a snapshot whose weights or optimizer state are not finite (training diverged): such a checkpoint
// would become `latest` and every resume would start from it.
absl::Status write_checkpoint(const std::string& run_dir, const CheckpointSnapshot& snapshot);

// The checkpoint `latest` names, as a directory path; NotFound when the run has none, DataLoss (naming
// `latest`) when the file is not one plain checkpoint name of this run directory.
absl::StatusOr<std::string> latest_checkpoint(const std::string& run_dir);

// The model config stored in CHECKPOINT/model.h5.
absl::StatusOr<GPTConfig> read_checkpoint_config(const std::string& checkpoint_dir);
// Loads CHECKPOINT/model.h5 into `model` (whose config must be the stored one), refusing weights that are not
// finite. On the GPU, call model.refresh_compute_weights() before its next forward.
absl::Status load_model_weights(const std::string& checkpoint_dir, GPT& model);
// CHECKPOINT/optimizer.h5: its step count, and one tensor's values (checked to hold `numel`).
absl::StatusOr<int64_t> read_optimizer_steps(const std::string& checkpoint_dir);
absl::StatusOr<std::vector<float>> read_optimizer_tensor(const std::string& checkpoint_dir,
                                                         const std::string& dataset, int64_t numel);
absl::StatusOr<TrainerState> read_trainer_state(const std::string& checkpoint_dir);
// The manifest: every file's size and CRC-32 as written (train/checkpoint/manifest.h). Readers of a
// checkpoint call it before anything else reads the files: verify_checkpoint_files for all three (resuming),
// verify_model_files for model.h5 and trainer.h5 only (evaluating and sampling, which need no optimizer
// state, so a checkpoint kept for inference may leave optimizer.h5 out of its manifest).
absl::Status verify_checkpoint_files(const std::string& checkpoint_dir);
absl::Status verify_model_files(const std::string& checkpoint_dir);
// Whether the checkpoint can be resumed from: the manifest; every dataset read (so HDF5 verifies every
// checksum) and every number finite; the trainer state in range (step >= 0 and the directory's, recipe and
// loader state parseable); the optimizer's step count the trainer's; the model config valid and the one the
// saved recipe builds. The first problem, naming the file.
absl::Status verify_checkpoint(const std::string& checkpoint_dir);

}  // namespace nanoforge
