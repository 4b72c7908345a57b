// StopVote: with one rank nothing is agreed (what happened since the vote counts too); with several only what
// every rank voted (a signal since the vote counts at the next step).
#include "train/stop_vote.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "support/stop_signal.h"

namespace nanoforge {

std::string StopRequest::cause() const {
  return signal == kSignalElsewhere ? std::string("a signal to another rank")
                                    : fmt::format("signal {}", signal);
}

void StopVote::cast(StepRequest& request) {
  votes_ = Votes{stop_signal(), writer_.failed_write()};
  request.signalled = votes_->local_signal != 0;
  request.failed_save = !votes_->local_failure.ok();
}

void StopVote::count(const StepResult& result) {
  votes_->ranks_signalled = result.ranks_signalled;
  votes_->ranks_failed = result.ranks_failed_save;
}

absl::StatusOr<StopRequest> StopVote::agree() {
  Votes votes;
  if (votes_) {  // voted in the step just taken
    votes = std::move(*votes_);
    votes_.reset();
  } else {
    votes.local_signal = stop_signal();
    votes.local_failure = writer_.failed_write();
    if (world_size_ > 1) {  // a lost rank: the run stops on the communicator's error
      NANOFORGE_ASSIGN_OR_RETURN(const auto summed,
                                 rank_sums_.sum(std::array<double, 2>{votes.local_signal != 0 ? 1.0 : 0.0,
                                                                      votes.local_failure.ok() ? 0.0 : 1.0}));
      votes.ranks_signalled = summed[0];
      votes.ranks_failed = summed[1];
    }
  }
  if (world_size_ == 1) {
    NANOFORGE_RETURN_IF_ERROR(votes.local_failure.ok() ? writer_.failed_write() : votes.local_failure);
    return StopRequest{votes.local_signal != 0 ? votes.local_signal : stop_signal()};
  }
  NANOFORGE_RETURN_IF_ERROR(votes.local_failure);
  if (votes.ranks_failed > 0)
    return absl::AbortedError("rank 0 could not save a checkpoint (its error says why)");
  if (votes.local_signal != 0) return StopRequest{votes.local_signal};
  return StopRequest{votes.ranks_signalled > 0 ? StopRequest::kSignalElsewhere : 0};
}

}  // namespace nanoforge
