// Writes checkpoints in the background: the training loop hands over a host snapshot (the weights and the
// gathered optimizer state, the only
// stall) and goes on stepping while a thread serialises it (write_checkpoint) and then prunes old
// checkpoints. One write at a time — HDF5 is not thread-safe, and a checkpoint should not overtake the
// previous one — so a new save first waits for the pending one, and its error (if any) is returned then.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "optim/data_parallel_optimizer.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge {

// Which checkpoints to keep: the newest `keep_last`, every one whose step is a multiple of `keep_every`, and
// the one a run resumed from. keep_last < 1 keeps all.
struct RetentionPolicy {
  int64_t keep_last = -1;
  int64_t keep_every = -1;
  int64_t protected_step = -1;
};

// Deletes the step_NNNNNN directories the policy does not keep (never the one `latest` names).
absl::Status prune_checkpoints(const std::string& run_dir, const RetentionPolicy& policy);

// Deletes what saves interrupted by a crash or kill -9 left in RUN/checkpoints: .step_NNNNNN.partial-PID
// directories, .latest.partial-PID files and step_NNNNNN.replaced-PID directories whose process PID is no
// longer running on this machine. Returns their names.
absl::StatusOr<std::vector<std::string>> remove_stale_partial_checkpoints(const std::string& run_dir);

class CheckpointWriter {
 public:
  // Only the rank that `writes` (rank 0) copies and writes anything; the others take part in the state
  // gathering.
  CheckpointWriter(std::string run_dir, RetentionPolicy retention, bool writes)
      : run_dir_(std::move(run_dir)), retention_(retention), writes_(writes) {}
  ~CheckpointWriter() { wait().IgnoreError(); }
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the previous write — when it failed, returns its error and starts nothing — then copies the
  // model, optimizer and trainer state into the writer's snapshot buffers (reused from one checkpoint to the
  // next: this copy is the stall), and starts writing them in the background.
  // Collective: every rank calls it (the optimizer state is gathered from all of them).
  absl::Status save_async(const GPT& model, DataParallelOptimizer& optimizer, TrainerState trainer);
  // Waits for the pending write; its status.
  absl::Status wait();
  // Without waiting: the error of a background write that has finished and failed (the run should stop now,
  // not at the next save), else OK.
  absl::Status failed_write();
  void protect_step(int64_t step) { retention_.protected_step = step; }
  // Seconds the last finished write took, and its size.
  double last_write_seconds() const { return last_write_seconds_; }
  int64_t last_write_bytes() const { return last_write_bytes_; }

 private:
  std::string run_dir_;
  RetentionPolicy retention_;
  bool writes_ = true;
  CheckpointSnapshot snapshot_;  // owned by the background write while one is pending
  std::future<absl::Status> pending_;
  double last_write_seconds_ = 0;
  int64_t last_write_bytes_ = 0;
};

}  // namespace nanoforge
