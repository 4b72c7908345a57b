// CommWork (its State is shared by the engines, dist/comm_work_state.h) and the argument contract of every
// collective.
#include "dist/communicator.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "dist/collective_contract.h"
#include "dist/comm_work_state.h"
#include "support/check.h"

namespace nanoforge {

// ---- CommWork ----

void CommWork::State::complete(absl::Status result) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;
    completed_ = true;
    status_ = std::move(result);
  }
  completed_cv_.notify_all();
}

bool CommWork::State::done() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  if (!device_poll) return false;
  std::optional<absl::Status> outcome = device_poll();
  if (!outcome) return false;
  complete(*std::move(outcome));
  return true;
}

absl::Status CommWork::State::wait() {
  if (!device_poll) {
    std::unique_lock<std::mutex> lock(mutex_);
    completed_cv_.wait(lock, [&] { return completed_; });
    return status_;
  }
  // Device work: poll its event, spinning briefly (collectives on the critical path finish within
  // microseconds of being waited for) and then sleeping in short steps so a long wait costs no CPU. A
  // watchdog that fails the work completes it from another thread, which ends the loop too.
  const auto start = std::chrono::steady_clock::now();
  while (!done()) {
    if (std::chrono::steady_clock::now() - start < std::chrono::microseconds(200)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

std::shared_ptr<CommWork::State> CommWork::State::completed(std::string what, absl::Status result) {
  auto state = std::make_shared<State>(std::move(what));
  state->complete(std::move(result));
  return state;
}

absl::Status CommWork::wait() const {
  return state_ ? state_->wait() : absl::OkStatus();
}

absl::Status CommWork::wait_on_device() const {
  if (!state_) return absl::OkStatus();
  return state_->device_wait ? state_->device_wait() : state_->wait();
}

bool CommWork::done() const {
  return state_ ? state_->done() : true;
}

// ---- the argument contract ----

namespace dist {

const char* reduce_op_name(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : "average";
}

std::string describe_collective(const char* name, uint64_t sequence, const TensorView& tensor) {
  return fmt::format("{} #{} of {}", name, sequence, tensor.describe());
}

bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto* a_begin = static_cast<const char*>(a);
  const auto* b_begin = static_cast<const char*>(b);
  return a_begin < b_begin + b_bytes && b_begin < a_begin + a_bytes;
}

namespace {

void check_device(const TensorView& t, Device device, const char* engine, const char* what) {
  NANOFORGE_CHECK(t.device == device, "{}: the {} engine serves {} tensors, got {}", what, engine,
                  device_name(device), t.describe());
  NANOFORGE_CHECK(t.data != nullptr || t.numel() == 0, "{}: null data in {}", what, t.describe());
}

}  // namespace

void check_all_reduce(const TensorView& buffer, Device device, const char* engine) {
  check_device(buffer, device, engine, "all_reduce");
}

void check_reduce_scatter(const TensorView& input, const TensorView& output, int world_size, Device device,
                          const char* engine) {
  check_device(input, device, engine, "reduce_scatter");
  check_device(output, device, engine, "reduce_scatter");
  NANOFORGE_CHECK(input.dtype == output.dtype, "reduce_scatter: dtypes differ ({} vs {})", input.describe(),
                  output.describe());
  NANOFORGE_CHECK(input.numel() == output.numel() * world_size,
                  "reduce_scatter over {} ranks: input {} must hold world_size x output {} elements",
                  world_size, input.describe(), output.describe());
}

void check_all_gather(const TensorView& input, const TensorView& output, int world_size, Device device,
                      const char* engine) {
  check_device(input, device, engine, "all_gather");
  check_device(output, device, engine, "all_gather");
  NANOFORGE_CHECK(input.dtype == output.dtype, "all_gather: dtypes differ ({} vs {})", input.describe(),
                  output.describe());
  NANOFORGE_CHECK(output.numel() == input.numel() * world_size,
                  "all_gather over {} ranks: output {} must hold world_size x input {} elements", world_size,
                  output.describe(), input.describe());
}

void check_broadcast(const TensorView& buffer, int root, int world_size, Device device, const char* engine) {
  check_device(buffer, device, engine, "broadcast");
  NANOFORGE_CHECK(root >= 0 && root < world_size, "broadcast: root {} is not a rank of a world of {}", root,
                  world_size);
}

}  // namespace dist

}  // namespace nanoforge
