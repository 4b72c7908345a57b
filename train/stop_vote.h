// When the run stops early. A signal may reach some ranks and not others (a scheduler signals one node
// first), and only rank 0 learns that its background save failed; every rank must stop after the same step,
// so the stop is agreed on: each step carries this rank's votes in its own all-reduce
// (StepRequest::signalled, failed_save), and before a process's first step the ranks vote in one of their
// own.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "step/training_step.h"
#include "train/checkpoint/writer.h"
#include "train/rank_sums.h"

namespace nanoforge {

struct StopRequest {
  static constexpr int kSignalElsewhere = -1;  // only other ranks saw a signal
  int signal = 0;                              // this rank's signal, kSignalElsewhere, or 0: no stop
  bool requested() const { return signal != 0; }
  std::string cause() const;  // "signal 15", "a signal to another rank"
};

class StopVote {
 public:
  StopVote(int64_t world_size, RankSums& rank_sums, CheckpointWriter& writer)
      : world_size_(world_size), rank_sums_(rank_sums), writer_(writer) {}

  void cast(StepRequest& request);       // before a step: this rank's votes ride on its all-reduce
  void count(const StepResult& result);  // after it: what every rank voted

  // Whether to stop before the next step; an error when a save failed (on rank 0, its own error) or the vote
  // itself did (a lost rank).
  absl::StatusOr<StopRequest> agree();

 private:
  struct Votes {
    int local_signal = 0;
    absl::Status local_failure;
    double ranks_signalled = 0, ranks_failed = 0;
  };

  int64_t world_size_;
  RankSums& rank_sums_;
  CheckpointWriter& writer_;
  std::optional<Votes> votes_;  // from the step just taken, until agree uses them
};

}  // namespace nanoforge
