// One optimizer step of data-parallel training, written once: the trainer (train/trainer.cpp), `nanoforge
// bench step` (step/step_timing.cpp) and the performance model (perf/step_recording.cpp, which runs it
// with every op and collective recorded instead of executed) all call TrainingStep::run, so what is timed and
// what is predicted is the step that trains. A step is: every micro-batch's forward and backward (the last
// backward starts the bucketed gradient reduction as its layers finish), the update, one all-reduce of the
// step's scalars, and the weight all-gathers that the next forward waits for layer by layer.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>

#include "kernels/device_buffer.h"
#include "kernels/tensor.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/schedules.h"

namespace nanoforge {

// The step's scalars, kept on the device and summed over the ranks in the one all-reduce that
// DataParallelOptimizer::start_step issues: the squared gradient norm (slot 0, the optimizer's), the sum of
// the micro-batches' mean losses, and the ranks' stop votes (which a separate all-reduce at the next step's
// start would queue behind the weight gathers and hold the host until they finish).
enum StepSum : int64_t { kGradSquares, kLossSum, kRanksSignalled, kRanksFailedSave, kStepSums };

// Where in a step the ops that follow belong (for a recorder that attributes each op to a part of the step).
enum class StepStage { kForward, kBackward, kOptimizer, kStepEnd };

// One micro-batch's token rows on the model's device: ids and targets (B, T) i32.
struct MicroBatch {
  TensorView ids, targets;
};

struct StepRequest {
  int64_t grad_accum_steps = 1;
  ScheduleValues schedule;
  // The micro-batch to train on next (the trainer's loader, the benchmark's random rows); an error stops
  // the step before its update.
  std::function<absl::StatusOr<MicroBatch>(int64_t micro)> next_micro_batch;
  // This rank's stop votes, summed over the ranks with the step's scalars.
  bool signalled = false;
  bool failed_save = false;
  // Told before each part of the step, when set.
  std::function<void(StepStage)> on_stage;
};

struct StepResult {
  double loss = 0;  // the mean over the micro-batches and the ranks
  double grad_norm = 0;
  double ranks_signalled = 0;  // how many ranks voted to stop
  double ranks_failed_save = 0;
};

class TrainingStep {
 public:
  // The model must be planned for its micro-batch shape (GPT::plan) before each run; the optimizer owns the
  // model's parameters and gradients. Each forward waits only for its own layers' weights' gathers.
  TrainingStep(GPT& model, DataParallelOptimizer& optimizer, int world_size);
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  absl::StatusOr<StepResult> run(const StepRequest& request);

 private:
  GPT& model_;
  DataParallelOptimizer& optimizer_;
  int world_size_;
  DeviceBuffer sums_buffer_;  // kStepSums f64 on the model's device
};

}  // namespace nanoforge
