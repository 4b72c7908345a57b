// The watchdog of one communicator: a thread that turns a collective making no progress for
// `timeout_seconds` (a lost or stuck rank) into an error instead of a hang, as PyTorch's NCCL watchdog does.
// Engines report collectives as they start and finish (in order); on a timeout the watchdog asks the engine
// which ranks did not arrive, fails every queued collective with that message (CommWork::wait returns it),
// lets the engine unblock itself (NCCL: ncclCommAbort), prints the message, and — if the program has not
// exited on its own within a grace period — ends the process with kCommFailureExitCode, because a process
// with a half-finished collective cannot shut MPI or CUDA down cleanly.
#pragma once

#include <absl/status/status.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace nanoforge {

// The exit status of a process ended by a watchdog: EX_TEMPFAIL from sysexits.h, "try again" — a launcher
// script can restart the job from its last checkpoint on this code.
inline constexpr int kCommFailureExitCode = 75;

// Whether a communicator of this process has failed (a lost or stuck rank, a broken connection, a teardown
// or an initialisation that did not finish): the program then exits with kCommFailureExitCode whatever
// error it reports, so that a launcher script knows to restart from the last checkpoint.
void note_communication_failure();
bool communication_failed();

class CommWatchdog {
 public:
  struct Hooks {
    // Called on the watchdog thread at every tick: the engine observes device work that finished and reports
    // it with finished() on the watchdog it is handed (never through its own pointer, which its destructor
    // may already have cleared while a poll runs); a non-OK result (e.g. an NCCL asynchronous error) fails
    // the communicator at once.
    std::function<absl::Status(CommWatchdog& watchdog)> poll;
    // Names the ranks that did not arrive at collective `sequence`, e.g. "rank 3 did not arrive (...)".
    std::function<std::string(uint64_t sequence)> diagnose;
    // Fails every queued collective with `error` and unblocks whatever waits on the stuck one.
    std::function<void(const absl::Status& error)> fail;
  };

  CommWatchdog(std::string engine, int rank, double timeout_seconds, Hooks hooks);
  ~CommWatchdog();
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

  // A collective was queued (NCCL) or started (MPI). Sequences are consecutive and finish in order.
  void started(uint64_t sequence, std::string description);
  void finished(uint64_t sequence);
  // Something moved for the oldest collective (a peer arrived at it): its clock restarts.
  void progressed();

  bool failed() const { return failed_.load(std::memory_order_acquire); }
  absl::Status failure() const;
  // Fails the communicator now (an engine saw an error itself), with the same reporting as a timeout.
  void fail_now(const absl::Status& error);
  // How often the watchdog looks, derived from the timeout (also the engines' heartbeat interval).
  double tick_seconds() const { return tick_seconds_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct InFlight {
    uint64_t sequence;
    std::string description;
    Clock::time_point started_at;
  };

  void run();
  void fire(const absl::Status& error);

  const std::string engine_;
  const int rank_;
  const double timeout_seconds_;
  const double tick_seconds_;
  const Hooks hooks_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  Clock::time_point last_progress_at_;
  bool stopping_ = false;
  std::atomic<bool> failed_{false};
  absl::Status failure_;
  std::thread thread_;
};

// A deadline for one blocking step that has no collective to fail (NCCL initialisation, MPI_Finalize): if
// the object still exists `seconds` after construction, the process prints `what` and exits with
// kCommFailureExitCode.
class ExitDeadline {
 public:
  ExitDeadline(double seconds, std::string what);
  ~ExitDeadline();
  ExitDeadline(const ExitDeadline&) = delete;
  ExitDeadline& operator=(const ExitDeadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable disarmed_cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

}  // namespace nanoforge
