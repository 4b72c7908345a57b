// The NCCL engine: the enqueue path (event from the compute stream -> comm stream -> collective -> completion
// event, which the compute stream can wait for: CommWork::wait_on_device) and the watchdog's side. The
// communicator is non-blocking, so every NCCL call returns and the watchdog owns the waiting: a collective
// is registered before NCCL is called, ncclInProgress is polled while the watchdog can fail it, teardown has
// the same deadline, and on a failure ncclCommAbort runs once. docs/distributed.md says why.
#include "dist/nccl_engine_parts.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "dist/collective_contract.h"
#include "dist/comm_watchdog.h"
#include "dist/comm_work_state.h"
#include "dist/heartbeats.h"
#include "dist/mpi_heartbeats.h"
#include "dist/mpi_runtime.h"
#include "support/check.h"

namespace nanoforge {

std::string cuda_error_text(cudaError_t error) {
  return fmt::format("{} ({})", cudaGetErrorString(error), cudaGetErrorName(error));
}

std::string nccl_error_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = fmt::format("{} (ncclResult {})", ncclGetErrorString(result), static_cast<int>(result));
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text += fmt::format(": {}", last);
  return text;
}

namespace {

constexpr const char* kEngine = "nccl";
// The CUDA kernels (kernels/cuda/) launch on the legacy default stream: a collective waits for what was
// queued there before it.
const cudaStream_t kComputeStream = cudaStreamLegacy;

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kF8E4M3:  // FP8 codes are a step's scratch, never reduced
    case DType::kF8E5M2:
      break;
  }
  NANOFORGE_CHECK(false, "no NCCL type for {}", dtype_name(dtype));
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  NANOFORGE_CHECK(op == ReduceOp::kSum || dtype != DType::kI32,
                  "kAverage of i32 is not defined (integer division); reduce with kSum");
  return op == ReduceOp::kSum ? ncclSum : ncclAvg;
}

size_t count_of(const TensorView& t) {
  return static_cast<size_t>(t.numel());
}

// Makes `device` current on this thread for a scope and restores the caller's afterwards: events, the
// legacy default stream and NCCL calls belong to the current device, and the calling thread may have chosen
// another one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// A completion event, destroyed when the last CommWork or in-flight entry that refers to it goes.
struct CudaEvent {
  cudaEvent_t event = nullptr;
  ~CudaEvent() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

// Whether the communicator has failed, shared with the CommWork states' pollers (which may outlive it).
struct Health {
  std::atomic<bool> failed{false};
  std::mutex mutex;
  absl::Status failure;

  absl::Status get() {
    std::lock_guard<std::mutex> lock(mutex);
    return failure;
  }
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclParts& parts, const DistOptions& options)
      : parts_(parts), options_(options), health_(std::make_shared<Health>()) {
    if (parts_.heartbeat_comm != MPI_COMM_NULL) {
      auto lock = MpiRuntime::call_lock();
      heartbeats_ = std::make_shared<MpiHeartbeats>(parts_.heartbeat_comm, parts_.rank, parts_.world_size);
    } else {
      heartbeats_ = parts_.tcp_heartbeats;
    }
    watchdog_ = std::make_unique<CommWatchdog>(
        kEngine, parts_.rank, options_.timeout_seconds,
        CommWatchdog::Hooks{
            .poll = [this](CommWatchdog& watchdog) { return poll(watchdog); },
            .diagnose = [this](uint64_t sequence) { return diagnose(sequence); },
            .fail = [this](const absl::Status& error) { fail_all(error); },
        });
    if (heartbeats_) heartbeat_thread_ = std::thread([this] { heartbeat_main(); });
    if (heartbeats_over_mpi()) stopper_ = MpiRuntime::add_stopper([this] { stop_heartbeats(); });
  }

  ~NcclCommunicator() override {
    // Let queued collectives finish (the watchdog still guards them), then take everything down.
    while (!health_->failed.load() && cudaStreamQuery(parts_.stream) == cudaErrorNotReady)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (!health_->failed.load()) finalize();
    if (stopper_ >= 0) MpiRuntime::remove_stopper(stopper_);
    stop_heartbeats();
    watchdog_.reset();
    const bool failed = health_->failed.load();
    if (heartbeats_) {
      if (failed) heartbeats_->abandon();
      heartbeats_.reset();
    }
    if (heartbeats_over_mpi()) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!failed && !finalized) {
        auto lock = MpiRuntime::call_lock();
        MPI_Comm_free(&parts_.heartbeat_comm);
      }
    }
    if (failed) return;  // aborted (or abandoned): the stream may hold a dead kernel, leave it all
    const DeviceGuard device(parts_.local_rank);
    ncclCommDestroy(parts_.comm);
    cudaEventDestroy(parts_.ready);
    cudaStreamDestroy(parts_.stream);
    cudaFree(parts_.barrier_value);
  }

  int rank() const override { return parts_.rank; }
  int world_size() const override { return parts_.world_size; }
  int local_rank() const override { return parts_.local_rank; }
  std::string engine_name() const override { return kEngine; }

  CommWork all_reduce(TensorView buffer, ReduceOp op) override {
    dist::check_all_reduce(buffer, Device::kCuda, kEngine);
    const ncclDataType_t type = nccl_type(buffer.dtype);
    const ncclRedOp_t nccl_reduce = nccl_op(op, buffer.dtype);
    return enqueue("all_reduce", buffer, [&](cudaStream_t stream) {
      return ncclAllReduce(buffer.data, buffer.data, count_of(buffer), type, nccl_reduce, parts_.comm,
                           stream);
    });
  }

  CommWork reduce_scatter(TensorView input, TensorView output, ReduceOp op) override {
    dist::check_reduce_scatter(input, output, world_size(), Device::kCuda, kEngine);
    NANOFORGE_CHECK(!dist::overlaps(input.data, input.bytes(), output.data, output.bytes()) ||
                        in_place_chunk(input, output),
                    "reduce_scatter: output {} overlaps input {} other than as chunk {} (in place)",
                    output.describe(), input.describe(), rank());
    const ncclDataType_t type = nccl_type(input.dtype);
    const ncclRedOp_t nccl_reduce = nccl_op(op, input.dtype);
    return enqueue("reduce_scatter", input, [&](cudaStream_t stream) {
      return ncclReduceScatter(input.data, output.data, count_of(output), type, nccl_reduce, parts_.comm,
                               stream);
    });
  }

  CommWork all_gather(TensorView input, TensorView output) override {
    dist::check_all_gather(input, output, world_size(), Device::kCuda, kEngine);
    NANOFORGE_CHECK(!dist::overlaps(input.data, input.bytes(), output.data, output.bytes()) ||
                        in_place_chunk(output, input),
                    "all_gather: input {} overlaps output {} other than as chunk {} (in place)",
                    input.describe(), output.describe(), rank());
    const ncclDataType_t type = nccl_type(input.dtype);
    return enqueue("all_gather", input, [&](cudaStream_t stream) {
      return ncclAllGather(input.data, output.data, count_of(input), type, parts_.comm, stream);
    });
  }

  CommWork broadcast(TensorView buffer, int root) override {
    dist::check_broadcast(buffer, root, world_size(), Device::kCuda, kEngine);
    const ncclDataType_t type = nccl_type(buffer.dtype);
    return enqueue("broadcast", buffer, [&](cudaStream_t stream) {
      return ncclBroadcast(buffer.data, buffer.data, count_of(buffer), type, root, parts_.comm, stream);
    });
  }

  absl::Status barrier() override {
    const TensorView value(parts_.barrier_value, {1}, DType::kF32, Device::kCuda);
    return enqueue("barrier", value,
                   [&](cudaStream_t stream) {
                     return ncclAllReduce(value.data, value.data, 1, ncclFloat32, ncclSum, parts_.comm,
                                          stream);
                   })
        .wait();
  }

 private:
  struct InFlight {
    uint64_t sequence;
    std::shared_ptr<CudaEvent> done;
    std::shared_ptr<CommWork::State> state;
  };

  bool in_place_chunk(const TensorView& whole, const TensorView& chunk) const {
    return static_cast<const char*>(whole.data) + rank() * chunk.bytes() == chunk.data;
  }

  CommWork failed_work(const std::string& description) {
    return CommWork(CommWork::State::completed(description, health_->get()));
  }

  // Queues one collective: the comm stream waits for the compute stream, `launch` enqueues the NCCL call on
  // the comm stream, and an event after it tells when it is done.
  template <class Launch>
  CommWork enqueue(const char* name, const TensorView& tensor, Launch&& launch) {
    std::unique_lock<std::timed_mutex> lock(comm_mutex_);
    const DeviceGuard device(parts_.local_rank);
    const uint64_t sequence = next_sequence_++;
    const std::string description = dist::describe_collective(name, sequence, tensor);
    if (health_->failed.load()) return failed_work(description);
    auto done = std::make_shared<CudaEvent>();
    cudaError_t cuda = cudaEventCreateWithFlags(&done->event, cudaEventDisableTiming);
    if (cuda == cudaSuccess) cuda = cudaEventRecord(parts_.ready, kComputeStream);
    if (cuda == cudaSuccess) cuda = cudaStreamWaitEvent(parts_.stream, parts_.ready, 0);
    if (cuda != cudaSuccess) {
      lock.unlock();
      return fail_enqueue(description, fmt::format("CUDA: {}", cuda_error_text(cuda)));
    }
    // The watchdog and the peers learn of the collective before NCCL is called: the call may have to wait
    // for the peers (NCCL connects the ranks inside the first collectives that need it).
    watchdog_->started(sequence, description);
    latest_sequence_.store(sequence + 1);
    heartbeat_cv_.notify_one();
    ncclResult_t result = launch(parts_.stream);
    // ncclInProgress: NCCL is still queueing it. Polled here, while the watchdog may time it out; then the
    // loop lets go of the communicator, and fail_all aborts it.
    while (result == ncclInProgress) {
      if (health_->failed.load()) return failed_work(description);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (ncclCommGetAsyncError(parts_.comm, &result) != ncclSuccess) result = ncclInternalError;
    }
    if (result != ncclSuccess) {
      const std::string text = nccl_error_text(result, parts_.comm);
      lock.unlock();
      return fail_enqueue(description, fmt::format("{}; {}", text, diagnose_after_error(sequence)));
    }
    cuda = cudaEventRecord(done->event, parts_.stream);
    if (cuda != cudaSuccess) {
      lock.unlock();
      return fail_enqueue(description, fmt::format("CUDA: {}", cuda_error_text(cuda)));
    }
    lock.unlock();

    auto state = std::make_shared<CommWork::State>(description);
    state->device_poll = [done, health = health_, description]() -> std::optional<absl::Status> {
      if (health->failed.load()) return health->get();
      const cudaError_t query = cudaEventQuery(done->event);
      if (query == cudaErrorNotReady) return std::nullopt;
      if (query == cudaSuccess) return absl::OkStatus();
      return absl::InternalError(
          fmt::format("{} failed on the GPU: {}", description, cuda_error_text(query)));
    };
    state->device_wait = [done, health = health_, description, device = parts_.local_rank]() -> absl::Status {
      if (health->failed.load()) return health->get();
      const DeviceGuard guard(device);
      if (const cudaError_t wait = cudaStreamWaitEvent(kComputeStream, done->event, 0); wait != cudaSuccess) {
        return absl::InternalError(
            fmt::format("the compute stream cannot wait for {}: {}", description, cuda_error_text(wait)));
      }
      return absl::OkStatus();
    };
    {
      std::lock_guard<std::mutex> in_flight_lock(in_flight_mutex_);
      in_flight_.push_back({sequence, done, state});
    }
    // A failure between the checks above and now has already failed the list it was not yet on.
    if (health_->failed.load()) state->complete(health_->get());
    return CommWork(state);
  }

  CommWork fail_enqueue(const std::string& description, const std::string& reason) {
    watchdog_->fail_now(absl::InternalError(
        fmt::format("rank {}: queueing {} on NCCL failed: {}", rank(), description, reason)));
    return failed_work(description);
  }

  // The watchdog's tick: retire finished collectives in order, then ask NCCL about asynchronous errors.
  absl::Status poll(CommWatchdog& watchdog) {
    cudaSetDevice(parts_.local_rank);  // this thread's CUDA calls belong to our GPU
    while (true) {
      InFlight front;
      {
        std::lock_guard<std::mutex> lock(in_flight_mutex_);
        if (in_flight_.empty()) break;
        front = in_flight_.front();
      }
      const cudaError_t query = cudaEventQuery(front.done->event);
      if (query == cudaErrorNotReady) break;
      if (query != cudaSuccess) {
        return absl::InternalError(
            fmt::format("{} failed on the GPU: {}", front.state->description, cuda_error_text(query)));
      }
      front.state->complete(absl::OkStatus());
      watchdog.finished(front.sequence);
      std::lock_guard<std::mutex> lock(in_flight_mutex_);
      in_flight_.pop_front();
      oldest_sequence_.store(in_flight_.empty() ? front.sequence + 1 : in_flight_.front().sequence);
    }
    // NCCL's own view (a peer's connection broke, a network error). Skipped while an enqueue holds the
    // communicator: the next tick asks again.
    std::unique_lock<std::timed_mutex> lock(comm_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || health_->failed.load()) return absl::OkStatus();
    ncclResult_t async_error = ncclSuccess;
    if (ncclCommGetAsyncError(parts_.comm, &async_error) == ncclSuccess && async_error != ncclSuccess &&
        async_error != ncclInProgress) {
      return absl::UnavailableError(fmt::format("NCCL reported an asynchronous error: {}; {}",
                                                nccl_error_text(async_error, parts_.comm),
                                                diagnose_after_error(oldest_sequence_.load())));
    }
    return absl::OkStatus();
  }

  std::string diagnose(uint64_t sequence) {
    if (heartbeats_) return heartbeats_->describe_missing(sequence, options_.timeout_seconds / 2);
    return "a world of one rank: no peer to name";
  }

  // After an error NCCL saw first (a peer's connection closed): one watchdog tick for the heartbeats to
  // notice too, so that the report names the peer rather than repeating what was heard before.
  std::string diagnose_after_error(uint64_t sequence) {
    if (heartbeats_) std::this_thread::sleep_for(std::chrono::duration<double>(watchdog_->tick_seconds()));
    return diagnose(sequence);
  }

  bool heartbeats_over_mpi() const { return parts_.heartbeat_comm != MPI_COMM_NULL; }

  // Teardown under the timeout: ncclCommFinalize (which waits for the peers) polled like a collective,
  // announced to the peers as the collective after the last so that a rank lost here is named. On a
  // timeout or an error the communicator is aborted instead of destroyed.
  void finalize() {
    std::unique_lock<std::timed_mutex> lock(comm_mutex_);  // the watchdog's poll stays off the communicator
    const DeviceGuard device(parts_.local_rank);
    const uint64_t sequence = next_sequence_;
    latest_sequence_.store(sequence + 1);
    heartbeat_cv_.notify_one();
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(options_.timeout_seconds));
    ncclResult_t result = ncclCommFinalize(parts_.comm);
    while (result == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(parts_.comm, &result) != ncclSuccess) result = ncclInternalError;
    }
    if (result == ncclSuccess) return;
    const std::string what = result == ncclInProgress
                                 ? fmt::format("did not finish within {} s", options_.timeout_seconds)
                                 : fmt::format("failed: {}", nccl_error_text(result, parts_.comm));
    const absl::Status error = absl::DeadlineExceededError(
        fmt::format("rank {}: NCCL teardown (ncclCommFinalize) {}: {}; aborting the communicator", rank(),
                    what, result == ncclInProgress ? diagnose(sequence) : diagnose_after_error(sequence)));
    fmt::print(stderr, "nanoforge: {}\n", std::string(error.message()));
    std::fflush(stderr);
    note_communication_failure();
    {
      std::lock_guard<std::mutex> health_lock(health_->mutex);
      health_->failure = error;
      health_->failed.store(true);
    }
    if (heartbeats_over_mpi()) MpiRuntime::mark_broken();
    ExitDeadline abort_deadline(kNcclAbortDeadlineSeconds, fmt::format("rank {}: ncclCommAbort", rank()));
    ncclCommAbort(parts_.comm);
  }

  // Fails everything queued, then aborts the communicator so the kernels waiting for a lost peer exit.
  void fail_all(const absl::Status& error) {
    {
      std::lock_guard<std::mutex> lock(health_->mutex);
      health_->failure = error;
      health_->failed.store(true);
    }
    if (heartbeats_over_mpi()) MpiRuntime::mark_broken();
    {
      std::lock_guard<std::mutex> lock(in_flight_mutex_);
      for (InFlight& work : in_flight_)
        work.state->complete(error);
    }
    std::unique_lock<std::timed_mutex> lock(comm_mutex_, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::seconds(5))) {
      fmt::print(stderr, "nanoforge: rank {}: an NCCL call is blocked; not aborting the communicator\n",
                 rank());
      return;
    }
    ExitDeadline deadline(kNcclAbortDeadlineSeconds, fmt::format("rank {}: ncclCommAbort", rank()));
    const DeviceGuard device(parts_.local_rank);
    ncclCommAbort(parts_.comm);
  }

  // Announce the newest queued collective to every peer when it changes and while collectives
  // are in flight, and take in theirs.
  void heartbeat_main() {
    using Clock = std::chrono::steady_clock;
    const auto interval = std::chrono::duration<double>(watchdog_->tick_seconds());
    uint64_t announced = 0;
    Clock::time_point announced_at = Clock::now();
    std::unique_lock<std::mutex> lock(heartbeat_mutex_);
    while (!heartbeat_stopping_) {
      heartbeat_cv_.wait_for(lock, interval / 4);
      if (heartbeat_stopping_ || health_->failed.load()) continue;
      const uint64_t latest = latest_sequence_.load();  // sequence + 1 of the newest; 0: none yet
      bool busy = false;
      {
        std::lock_guard<std::mutex> in_flight_lock(in_flight_mutex_);
        busy = !in_flight_.empty();
      }
      int arrived = 0;
      {
        std::unique_lock<std::mutex> mpi_lock;
        if (heartbeats_over_mpi()) mpi_lock = MpiRuntime::call_lock();
        if (latest > 0 && (latest != announced || (busy && Clock::now() - announced_at > interval))) {
          heartbeats_->announce(latest - 1);
          announced = latest;
          announced_at = Clock::now();
        }
        arrived = heartbeats_->poll(oldest_sequence_.load());
      }
      if (arrived > 0) watchdog_->progressed();
    }
  }

  void stop_heartbeats() {
    {
      std::lock_guard<std::mutex> lock(heartbeat_mutex_);
      heartbeat_stopping_ = true;
    }
    heartbeat_cv_.notify_all();
    if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  }

  NcclParts parts_;
  const DistOptions options_;
  std::shared_ptr<Health> health_;
  std::shared_ptr<Heartbeats> heartbeats_;
  std::unique_ptr<CommWatchdog> watchdog_;

  std::timed_mutex comm_mutex_;  // one NCCL call on the communicator at a time (enqueue vs abort)
  uint64_t next_sequence_ = 0;   // guarded by comm_mutex_
  std::mutex in_flight_mutex_;
  std::deque<InFlight> in_flight_;
  std::atomic<uint64_t> oldest_sequence_{0};
  std::atomic<uint64_t> latest_sequence_{0};

  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_cv_;
  bool heartbeat_stopping_ = false;
  std::thread heartbeat_thread_;
  int stopper_ = -1;
};

}  // namespace

std::unique_ptr<Communicator> open_nccl_communicator(const NcclParts& parts, const DistOptions& options) {
  return std::make_unique<NcclCommunicator>(parts, options);
}

}  // namespace nanoforge
