// MpiCommunicator: a queue of collectives, the communication thread that runs them one at a time, and the
// wiring of heartbeats and watchdog. In-place forms follow NCCL's: reduce_scatter whose output is chunk
// `rank` of its input and all_gather whose input is chunk `rank` of its output (MPI_IN_PLACE underneath).
#include "dist/mpi_communicator.h"

#include <fmt/format.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "dist/collective_contract.h"
#include "dist/comm_watchdog.h"
#include "dist/comm_work_state.h"
#include "dist/mpi_heartbeats.h"
#include "dist/mpi_runtime.h"
#include "support/check.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr const char* kEngine = "mpi";

// Polling: MPI_Test and sched_yield (which hands the core to the compute thread or another rank when the
// machine is oversubscribed) for this long, then MPI_Test every kPollSleep, so a long collective costs a few
// percent of a core instead of all of it. Open MPI progresses non-blocking collectives only inside MPI calls
// ("OMPI progress: no" in ompi_info), so the sleep is short.
constexpr auto kSpinDuration = std::chrono::microseconds(2000);
constexpr auto kPollSleep = std::chrono::microseconds(20);

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      break;
  }
  NANOFORGE_CHECK(false, "the MPI engine serves f32, f64 and i32 CPU tensors, got {}", dtype_name(dtype));
  return MPI_DATATYPE_NULL;
}

int mpi_count(const TensorView& t) {
  NANOFORGE_CHECK(t.numel() <= INT_MAX, "the MPI engine moves at most {} elements per call, got {}", INT_MAX,
                  t.describe());
  return static_cast<int>(t.numel());
}

void scale(const TensorView& t, double factor) {
  const int64_t n = t.numel();
  if (t.dtype == DType::kF32) {
    float* data = t.as<float>();
    const auto f = static_cast<float>(factor);
    for (int64_t i = 0; i < n; ++i)
      data[i] *= f;
  } else if (t.dtype == DType::kF64) {
    double* data = t.as<double>();
    for (int64_t i = 0; i < n; ++i)
      data[i] *= factor;
  }
}

void check_average(const TensorView& t, ReduceOp op) {
  NANOFORGE_CHECK(op == ReduceOp::kSum || t.dtype != DType::kI32,
                  "kAverage of i32 is not defined (integer division); reduce with kSum, got {}",
                  t.describe());
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const MpiWorld& world, MPI_Comm collectives, MPI_Comm heartbeats,
                  const DistOptions& options)
      : world_(world), comm_(collectives), heartbeat_comm_(heartbeats), options_(options) {
    {
      auto lock = MpiRuntime::call_lock();
      heartbeats_ = std::make_unique<MpiHeartbeats>(heartbeat_comm_, world_.rank, world_.world_size);
    }
    watchdog_ = std::make_unique<CommWatchdog>(
        kEngine, world_.rank, options_.timeout_seconds,
        CommWatchdog::Hooks{
            .poll = nullptr,
            .diagnose =
                [this](uint64_t sequence) {
                  return heartbeats_->describe_missing(sequence, options_.timeout_seconds / 2);
                },
            .fail = [this](const absl::Status& error) { fail_all(error); },
        });
    thread_ = std::thread([this] { thread_main(); });
    stopper_ = MpiRuntime::add_stopper([this] { stop(); });
  }

  ~MpiCommunicator() override {
    MpiRuntime::remove_stopper(stopper_);
    stop();
  }

  int rank() const override { return world_.rank; }
  int world_size() const override { return world_.world_size; }
  int local_rank() const override { return world_.local_rank; }
  std::string engine_name() const override { return kEngine; }

  CommWork all_reduce(TensorView buffer, ReduceOp op) override {
    dist::check_all_reduce(buffer, Device::kCpu, kEngine);
    check_average(buffer, op);
    mpi_type(buffer.dtype);
    mpi_count(buffer);
    return enqueue(
        {.kind = Kind::kAllReduce, .name = "all_reduce", .input = buffer, .output = buffer, .op = op});
  }

  CommWork reduce_scatter(TensorView input, TensorView output, ReduceOp op) override {
    dist::check_reduce_scatter(input, output, world_size(), Device::kCpu, kEngine);
    check_average(input, op);
    mpi_type(input.dtype);
    mpi_count(input);
    NANOFORGE_CHECK(!dist::overlaps(input.data, input.bytes(), output.data, output.bytes()) ||
                        in_place_chunk(input, output),
                    "reduce_scatter: output {} overlaps input {} other than as chunk {} (in place)",
                    output.describe(), input.describe(), rank());
    return enqueue(
        {.kind = Kind::kReduceScatter, .name = "reduce_scatter", .input = input, .output = output, .op = op});
  }

  CommWork all_gather(TensorView input, TensorView output) override {
    dist::check_all_gather(input, output, world_size(), Device::kCpu, kEngine);
    mpi_type(input.dtype);
    mpi_count(output);
    NANOFORGE_CHECK(!dist::overlaps(input.data, input.bytes(), output.data, output.bytes()) ||
                        in_place_chunk(output, input),
                    "all_gather: input {} overlaps output {} other than as chunk {} (in place)",
                    input.describe(), output.describe(), rank());
    return enqueue({.kind = Kind::kAllGather, .name = "all_gather", .input = input, .output = output});
  }

  CommWork broadcast(TensorView buffer, int root) override {
    dist::check_broadcast(buffer, root, world_size(), Device::kCpu, kEngine);
    mpi_type(buffer.dtype);
    mpi_count(buffer);
    return enqueue(
        {.kind = Kind::kBroadcast, .name = "broadcast", .input = buffer, .output = buffer, .root = root});
  }

  absl::Status barrier() override { return enqueue({.kind = Kind::kBarrier, .name = "barrier"}).wait(); }

 private:
  enum class Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kBarrier };
  struct Job {
    Kind kind = Kind::kBarrier;
    const char* name = "";
    TensorView input = {};
    TensorView output = {};
    ReduceOp op = ReduceOp::kSum;
    int root = 0;
    uint64_t sequence = 0;
    std::shared_ptr<CommWork::State> state = nullptr;
  };

  // Whether `chunk` is exactly this rank's chunk of `whole` (the in-place form).
  bool in_place_chunk(const TensorView& whole, const TensorView& chunk) const {
    return static_cast<const char*>(whole.data) + rank() * chunk.bytes() == chunk.data;
  }

  CommWork enqueue(Job job) {
    std::lock_guard<std::mutex> lock(mutex_);
    job.sequence = next_sequence_++;
    const std::string description = job.kind == Kind::kBarrier
                                        ? fmt::format("barrier #{}", job.sequence)
                                        : dist::describe_collective(job.name, job.sequence, job.input);
    if (failed_) return CommWork(CommWork::State::completed(description, failure_));
    NANOFORGE_CHECK(!stopping_, "{} called on a communicator being destroyed", description);
    job.state = std::make_shared<CommWork::State>(description);
    CommWork work(job.state);
    queue_.push_back(std::move(job));
    queue_cv_.notify_one();
    return work;
  }

  void thread_main() {
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) break;
        job = std::move(queue_.front());
        queue_.pop_front();
        if (failed_) {
          job.state->complete(failure_);
          continue;
        }
        current_ = job.state;
      }
      absl::Status status = execute(job);
      if (status.ok()) finish(job);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        current_.reset();
      }
      if (!status.ok() && !watchdog_->failed()) watchdog_->fail_now(status);  // an MPI error: report it alike
      job.state->complete(watchdog_->failed() ? watchdog_->failure() : status);
    }
  }

  int start(const Job& job, MPI_Request* request) {
    const MPI_Datatype type = job.kind == Kind::kBarrier ? MPI_DATATYPE_NULL : mpi_type(job.input.dtype);
    switch (job.kind) {
      case Kind::kAllReduce:
        return MPI_Iallreduce(MPI_IN_PLACE, job.input.data, mpi_count(job.input), type, MPI_SUM, comm_,
                              request);
      case Kind::kReduceScatter:
        if (in_place_chunk(job.input, job.output)) {
          // The result lands in the first chunk of the input; finish() moves it to chunk `rank`.
          return MPI_Ireduce_scatter_block(MPI_IN_PLACE, job.input.data, mpi_count(job.output), type, MPI_SUM,
                                           comm_, request);
        }
        return MPI_Ireduce_scatter_block(job.input.data, job.output.data, mpi_count(job.output), type,
                                         MPI_SUM, comm_, request);
      case Kind::kAllGather:
        return MPI_Iallgather(in_place_chunk(job.output, job.input) ? MPI_IN_PLACE : job.input.data,
                              mpi_count(job.input), type, job.output.data, mpi_count(job.input), type, comm_,
                              request);
      case Kind::kBroadcast:
        return MPI_Ibcast(job.input.data, mpi_count(job.input), type, job.root, comm_, request);
      case Kind::kBarrier:
        return MPI_Ibarrier(comm_, request);
    }
    return MPI_ERR_OTHER;
  }

  // Runs one collective to completion, failure, or the watchdog's verdict.
  absl::Status execute(const Job& job) {
    using Clock = std::chrono::steady_clock;
    watchdog_->started(job.sequence, job.state->description);
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    {
      auto lock = MpiRuntime::call_lock();
      heartbeats_->announce(job.sequence);
      rc = start(job, &request);
    }
    if (rc != MPI_SUCCESS) {
      return absl::UnavailableError(
          fmt::format("rank {}: starting {} failed: {}", rank(), job.state->description, mpi_error_text(rc)));
    }
    const auto heartbeat_interval = std::chrono::duration<double>(watchdog_->tick_seconds());
    const Clock::time_point started = Clock::now();
    Clock::time_point announced = started;
    while (true) {
      int done = 0;
      int arrived = 0;
      {
        auto lock = MpiRuntime::call_lock();
        rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !done) {
          arrived = heartbeats_->poll(job.sequence);
          if (Clock::now() - announced > heartbeat_interval) {
            heartbeats_->announce(job.sequence);
            announced = Clock::now();
          }
        }
      }
      if (rc != MPI_SUCCESS) {
        return absl::UnavailableError(
            fmt::format("rank {}: {} failed: {}; {}", rank(), job.state->description, mpi_error_text(rc),
                        heartbeats_->describe_missing(job.sequence, options_.timeout_seconds / 2)));
      }
      if (done) break;
      if (arrived > 0) watchdog_->progressed();
      if (watchdog_->failed()) return watchdog_->failure();  // the request is abandoned with the communicator
      if (Clock::now() - started < kSpinDuration) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(kPollSleep);
      }
    }
    watchdog_->finished(job.sequence);
    return absl::OkStatus();
  }

  void finish(const Job& job) {
    if (job.kind == Kind::kReduceScatter && in_place_chunk(job.input, job.output) && rank() != 0)
      std::memmove(job.output.data, job.input.data, static_cast<size_t>(job.output.bytes()));
    if (job.op == ReduceOp::kAverage) scale(job.output, 1.0 / world_size());
  }

  // The watchdog's verdict (or an MPI error): every queued collective fails with it, now and later.
  void fail_all(const absl::Status& error) {
    MpiRuntime::mark_broken();
    std::deque<Job> queued;
    std::shared_ptr<CommWork::State> current;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failed_ = true;
      failure_ = error;
      queued.swap(queue_);
      current = current_;
    }
    if (current) current->complete(error);
    for (Job& job : queued)
      job.state->complete(error);
  }

  // Runs what is queued, then stops the thread and releases MPI resources (leaving them alone after a
  // failure: a lost rank can make those calls hang). Safe to call twice.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    queue_cv_.notify_all();
    thread_.join();
    const bool failed = watchdog_->failed();
    watchdog_.reset();
    if (failed) heartbeats_->abandon();
    heartbeats_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!failed && !finalized) {
      auto lock = MpiRuntime::call_lock();
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&heartbeat_comm_);
    }
  }

  const MpiWorld world_;
  MPI_Comm comm_;
  MPI_Comm heartbeat_comm_;
  const DistOptions options_;
  std::unique_ptr<MpiHeartbeats> heartbeats_;
  std::unique_ptr<CommWatchdog> watchdog_;

  std::mutex mutex_;  // guards the queue, the sequence counter, the failure and current_
  std::condition_variable queue_cv_;
  std::deque<Job> queue_;
  std::shared_ptr<CommWork::State> current_;
  uint64_t next_sequence_ = 0;
  bool stopping_ = false;
  bool failed_ = false;
  absl::Status failure_;
  std::thread thread_;
  int stopper_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> create_mpi_communicator(const LaunchEnv& env,
                                                                      const DistOptions& options) {
  NANOFORGE_ASSIGN_OR_RETURN(MpiRuntime * runtime, MpiRuntime::get());
  NANOFORGE_RETURN_IF_ERROR(runtime->check_matches(env));
  const MpiWorld& world = runtime->world();
  MPI_Comm collectives = MPI_COMM_NULL;
  MPI_Comm heartbeats = MPI_COMM_NULL;
  {
    // MPI_Comm_dup is collective: a rank that never gets here would hold the others forever.
    ExitDeadline deadline(
        options.timeout_seconds,
        fmt::format("rank {}: creating the MPI communicator (every rank must)", world.rank));
    auto lock = MpiRuntime::call_lock();
    if (MPI_Comm_dup(MPI_COMM_WORLD, &collectives) != MPI_SUCCESS ||
        MPI_Comm_dup(MPI_COMM_WORLD, &heartbeats) != MPI_SUCCESS) {
      return absl::UnavailableError(fmt::format("rank {}: MPI_Comm_dup failed", world.rank));
    }
    // Errors come back as codes (reported with the lost ranks) instead of aborting the job from inside MPI.
    MPI_Comm_set_errhandler(collectives, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(heartbeats, MPI_ERRORS_RETURN);
  }
  return std::unique_ptr<Communicator>(new MpiCommunicator(world, collectives, heartbeats, options));
}

}  // namespace nanoforge
