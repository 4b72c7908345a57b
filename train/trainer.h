// The training run: everything `nanoforge train` does between reading the recipe and exiting. It composes
// the parts — tokenizer and shards (data/), the model (model/), MuonAdamW and its schedules (optim/), the
// step (step/), evaluation, checkpoints, stop votes and the step log (train/) — and nothing below train/
// knows of the others. Trainer::run is the loop of nanochat's base_train; each part says when it is due.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "data/loader/loader.h"
#include "dist/communicator.h"
#include "eval/core/core_bundle.h"
#include "eval/token_batch_tensors.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "step/training_step.h"
#include "train/checkpoint/writer.h"
#include "train/evaluation.h"
#include "train/metrics_log.h"
#include "train/metrics_sidecar.h"
#include "train/rank_sums.h"
#include "train/recipe.h"
#include "train/run_dir_lock.h"
#include "train/run_setup.h"
#include "train/step_log.h"
#include "train/stop_vote.h"

namespace nanoforge {

class Trainer {
 public:
  // Every check first (a refusal writes nothing), then the communicator, the run directory claimed, the model
  // initialised or resumed: a run ready to train (train/run_setup.cpp). SIGTERM/SIGINT end start-up at once.
  static absl::StatusOr<std::unique_ptr<Trainer>> open(const Recipe& recipe, const TrainRunOptions& options);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Evaluate, sample and checkpoint when due, then one optimizer step, until the last step or an agreed stop
  // (a signal: after the current step, with a checkpoint); then rank 0 prints the run's summary.
  absl::Status run();

 private:
  using Clock = std::chrono::steady_clock;

  Trainer(RunSetup setup, std::optional<CoreBundle> core_bundle, const TrainRunOptions& options,
          std::unique_ptr<Communicator> communicator, std::optional<RunDirLock> run_dir_lock);
  absl::Status start();
  StepRequest request_for(int64_t step);
  bool checkpoint_due(int64_t step, bool last, const StopRequest& stop) const;
  absl::Status save(int64_t step, bool wait);
  void report_stop(const StopRequest& stop, int64_t step) const;
  absl::Status finish();
  void print_setup() const;

  std::unique_ptr<Communicator> communicator_;
  std::optional<RunDirLock> run_dir_lock_;  // rank 0's, held until the checkpoint writer is gone
  RunSetup setup_;
  const Recipe& recipe_;  // setup_.recipe
  const TrainRunOptions options_;
  const bool chief_;                         // rank 0: prints, writes metrics and checkpoints, samples
  std::optional<CoreBundle> core_bundle_;    // until start hands it to evaluation_
  std::optional<MetricsLog> metrics_;        // opened once a resume has trimmed what it will write again
  std::unique_ptr<MetricsSidecar> sidecar_;  // forwards metrics.jsonl to W&B / TensorBoard (log.*)
  GPT model_;
  DataParallelOptimizer optimizer_;
  TrainingStep step_;  // step/training_step.h: the step this loop, bench step and the performance model run
  std::unique_ptr<Loader> train_loader_;
  TokenBatchTensors tensors_;
  double data_wait_seconds_ = 0;  // of the step being taken
  CheckpointWriter writer_;
  RankSums rank_sums_;
  StopVote stop_vote_;
  std::optional<Evaluation> evaluation_;  // from start on
  std::optional<StepLog> step_log_;       // from start on
  int64_t first_step_ = 0;                // 0, or the resumed checkpoint's step
  int64_t last_step_ = 0;                 // --stop-at-step, or the horizon's num_iterations
  Clock::time_point run_start_ = Clock::now();
};

}  // namespace nanoforge
