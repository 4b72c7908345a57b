// CommWork::State, shared by the engines (internal to dist/): the completion flag and status of one queued
// collective. The MPI engine's communication thread completes it; NCCL work completes when its CUDA event
// has fired, which whoever looks first (a waiter or the watchdog) observes through `device_poll`. The first
// completion wins, so a watchdog that fails a collective before aborting the communicator is never
// overwritten by the aborted kernel's event firing afterwards.
#pragma once

#include <absl/status/status.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "dist/communicator.h"

namespace nanoforge {

struct CommWork::State {
  explicit State(std::string what) : description(std::move(what)) {}

  const std::string description;  // "all_reduce #12 of f32[1000]", for error messages
  // Set by engines whose completion is seen by polling a device (NCCL): nullopt while the device work runs,
  // then its outcome.
  std::function<std::optional<absl::Status>()> device_poll;
  // Set by engines with a device queue (NCCL): makes the compute stream wait for the work (wait_on_device).
  std::function<absl::Status()> device_wait;

  // Marks the work finished with `result`; later calls are ignored.
  void complete(absl::Status result);
  // Blocks until complete (polling device_poll when set) and returns the status.
  absl::Status wait();
  bool done();

  static std::shared_ptr<State> completed(std::string what, absl::Status result);

 private:
  std::mutex mutex_;
  std::condition_variable completed_cv_;
  bool completed_ = false;
  absl::Status status_;
};

}  // namespace nanoforge
