// What each optimizer step leaves behind: rank 0's console line and metrics record (loss, gradient norm,
// learning-rate multiplier, time, tokens/s, MFU, elapsed and ETA), the step's timing for
// TrainRunOptions::on_step on every rank, and the training time a checkpoint records (timed steps only, as
// nanochat's total_training_time). A loss that is not finite stops the run.
#pragma once

#include <absl/status/status.h>

#include <chrono>
#include <cstdint>

#include "step/training_step.h"
#include "train/metrics_log.h"
#include "train/metrics_sidecar.h"
#include "train/run_setup.h"

namespace nanoforge {

// Where a step's time went.
struct StepSeconds {
  double whole = 0;
  double exposed_comm = 0;  // waiting for gradient reductions and parameter gathers
  double data_wait = 0;     // waiting for the loader
};

class StepLog {
 public:
  // Steps `first_step` (0, or the resumed checkpoint's, whose training time was `resumed_training_seconds`)
  // to `last_step`; `metrics` and `sidecar` are rank 0's (null on the other ranks, and the sidecar when
  // log.* asks for none).
  StepLog(const RunSetup& setup, const TrainRunOptions& options, int64_t first_step, int64_t last_step,
          double resumed_training_seconds, std::chrono::steady_clock::time_point run_start,
          MetricsLog* metrics, MetricsSidecar* sidecar);

  // After step `step` (counted from 0; printed from 1).
  absl::Status write(int64_t step, const StepResult& result, const StepSeconds& seconds);

  double training_seconds() const { return training_seconds_; }

 private:
  const RunSetup& setup_;
  const TrainRunOptions& options_;
  int64_t first_step_, last_step_;
  double training_seconds_;          // timed steps only: a process's first includes its warm-up
  double resumed_training_seconds_;  // what training_seconds_ was at the resumed checkpoint
  int64_t timed_steps_ = 0;          // by this process: its ETA is its own rate
  std::chrono::steady_clock::time_point run_start_;
  MetricsLog* metrics_;
  MetricsSidecar* sidecar_;
};

}  // namespace nanoforge
