// Resuming a run: which checkpoint to start from (the newest that verifies, falling back past damaged ones
// and saying so; a --resume-from naming no directory refused as such), whether this run may continue it — a
// change that would silently break the run (the model's shape, the sequence length, the data order) is
// refused; others (evaluation cadence, number of iterations, learning rates...) are allowed and listed —
// and the weights, optimizer state and data stream it continues with.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/loader/loader.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "train/checkpoint/agreement.h"
#include "train/recipe.h"
#include "train/run_setup.h"

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

// The training steps a resume drops from metrics.jsonl: those trained after its checkpoint, which the resumed
// run trains again (a step under way when the run ended wrote no record and is not counted).
struct DroppedSteps {
  int64_t steps = 0;
  double seconds = 0;  // their step_ms, summed
};

// Drops the metrics a resumed run will write again: training records after `step`, evaluations at or after
// it; returns the training steps dropped.
absl::StatusOr<DroppedSteps> trim_metrics_after(const std::string& metrics_path, int64_t step);

// The checkpoint --resume or --resume-from continues, the same on every rank (agreement.h); "" for a fresh
// start, also when a --resume finds no checkpoint yet (a requeued job killed before its first: rank 0 then
// empties the metrics).
absl::StatusOr<std::string> agreed_resume_checkpoint(const TrainRunOptions& options, int64_t rank,
                                                     int64_t world_size, const SumOverRanks& sum_over_ranks);

// What a resumed run continues from.
struct ResumedRun {
  int64_t step = 0;             // the checkpoint's: the next step trained is step + 1
  double training_seconds = 0;  // the checkpoint's training time
  std::unique_ptr<Loader> train_loader;
  DroppedSteps redone;  // rank 0's: the steps metrics.jsonl held after the checkpoint
};

// `checkpoint` has passed verify_checkpoint: whether this run may continue it (the recipe, the data, the
// model, the steps), then its weights and this rank's share of the optimizer state into `model` and
// `optimizer`, and the data stream. Rank 0 drops the metrics it will write again (counting the steps it
// will redo) and prints what changed.
absl::StatusOr<ResumedRun> resume_from_checkpoint(const std::string& checkpoint, const RunSetup& setup,
                                                  const TrainRunOptions& options, int64_t rank, GPT& model,
                                                  DataParallelOptimizer& optimizer);

}  // namespace nanoforge
