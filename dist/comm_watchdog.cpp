// CommWatchdog: a thread per communicator that ticks a few times per timeout, lets the engine poll, and
// fires when the oldest collective has made no progress for the timeout.
#include "dist/comm_watchdog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace nanoforge {
namespace {

// How long a failed process may take to exit on its own (print its error, close files) before the watchdog
// ends it: the timeout itself, within [5 s, 60 s].
double exit_grace_seconds(double timeout_seconds) {
  return std::clamp(timeout_seconds, 5.0, 60.0);
}

[[noreturn]] void exit_now(const std::string& message) {
  fmt::print(stderr, "{}\n", message);
  std::fflush(stderr);
  ::_exit(kCommFailureExitCode);
}

std::atomic<bool>& communication_failure() {
  static std::atomic<bool> failed{false};
  return failed;
}

}  // namespace

void note_communication_failure() {
  communication_failure().store(true);
}

bool communication_failed() {
  return communication_failure().load();
}

CommWatchdog::CommWatchdog(std::string engine, int rank, double timeout_seconds, Hooks hooks)
    : engine_(std::move(engine)),
      rank_(rank),
      timeout_seconds_(timeout_seconds),
      // Ten looks per timeout, at most 4 per second and at least 20: a few percent of slack on the timeout.
      tick_seconds_(std::clamp(timeout_seconds / 10, 0.05, 0.25)),
      hooks_(std::move(hooks)),
      last_progress_at_(Clock::now()) {
  thread_ = std::thread([this] { run(); });
}

CommWatchdog::~CommWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CommWatchdog::started(uint64_t sequence, std::string description) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_flight_.empty()) last_progress_at_ = Clock::now();
  in_flight_.push_back({sequence, std::move(description), Clock::now()});
}

void CommWatchdog::finished(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!in_flight_.empty() && in_flight_.front().sequence <= sequence)
    in_flight_.pop_front();
  last_progress_at_ = Clock::now();
}

void CommWatchdog::progressed() {
  std::lock_guard<std::mutex> lock(mutex_);
  last_progress_at_ = Clock::now();
}

absl::Status CommWatchdog::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void CommWatchdog::fail_now(const absl::Status& error) {
  fire(error);
}

void CommWatchdog::fire(const absl::Status& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load()) return;
    failure_ = error;
    failed_.store(true, std::memory_order_release);
  }
  note_communication_failure();
  fmt::print(stderr, "nanoforge: {}\n", std::string(error.message()));
  std::fflush(stderr);
  hooks_.fail(error);
}

void CommWatchdog::run() {
  const auto tick = std::chrono::duration<double>(tick_seconds_);
  std::optional<Clock::time_point> exit_at;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, tick);
    if (stopping_) break;
    if (exit_at) {
      if (Clock::now() >= *exit_at) {
        exit_now(
            fmt::format("nanoforge: rank {}: the program did not exit within {:.0f} s of a failed "
                        "collective; exiting with status {}",
                        rank_, exit_grace_seconds(timeout_seconds_), kCommFailureExitCode));
      }
      continue;
    }
    // The engine's poll runs unlocked: it reports back through finished() / progressed().
    lock.unlock();
    absl::Status polled = hooks_.poll ? hooks_.poll(*this) : absl::OkStatus();
    lock.lock();
    if (failed_.load()) {
      exit_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(exit_grace_seconds(timeout_seconds_)));
      continue;
    }
    std::optional<absl::Status> error;
    if (!polled.ok()) {
      error = absl::Status(polled.code(), fmt::format("rank {}: {} communicator failed: {}", rank_, engine_,
                                                      std::string(polled.message())));
    } else if (!in_flight_.empty()) {
      const InFlight& oldest = in_flight_.front();
      const Clock::time_point since = std::max(oldest.started_at, last_progress_at_);
      const double stalled_seconds = std::chrono::duration<double>(Clock::now() - since).count();
      if (stalled_seconds > timeout_seconds_) {
        const uint64_t sequence = oldest.sequence;
        const std::string description = oldest.description;
        lock.unlock();
        const std::string diagnosis = hooks_.diagnose ? hooks_.diagnose(sequence) : "";
        lock.lock();
        error = absl::DeadlineExceededError(
            fmt::format("rank {}: {} collective {} made no progress for {:.1f} s (timeout {} s): {}", rank_,
                        engine_, description, stalled_seconds, timeout_seconds_, diagnosis));
      }
    }
    if (error) {
      lock.unlock();
      fire(*error);
      lock.lock();
      exit_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(exit_grace_seconds(timeout_seconds_)));
    }
  }
}

ExitDeadline::ExitDeadline(double seconds, std::string what) {
  thread_ = std::thread([this, seconds, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (disarmed_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return disarmed_; }))
      return;
    exit_now(fmt::format("nanoforge: {} did not finish within {:.0f} s; exiting with status {}", what,
                         seconds, kCommFailureExitCode));
  });
}

ExitDeadline::~ExitDeadline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disarmed_ = true;
  }
  disarmed_cv_.notify_all();
  thread_.join();
}

}  // namespace nanoforge
