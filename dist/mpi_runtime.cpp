// MpiRuntime: MPI_Init_thread once, MPI_Finalize at exit — skipped when a collective failed (a lost rank
// would make it wait forever) and bounded by a deadline otherwise (a rank that died after the last
// collective has the same effect).
#include "dist/mpi_runtime.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "dist/comm_watchdog.h"

namespace nanoforge {
namespace {

// How long MPI_Finalize may take at exit before the process leaves without it: it is a barrier, so a peer
// that crashed after the last collective would otherwise hold every other rank forever.
constexpr double kFinalizeDeadlineSeconds = 60;

struct RuntimeState {
  std::mutex mutex;  // guards `runtime`, `stoppers`, `broken`
  MpiRuntime* runtime = nullptr;
  std::map<int, std::function<void()>> stoppers;
  int next_handle = 0;
  bool broken = false;
  bool serialized = false;
  std::mutex call_mutex;  // serialises MPI calls under MPI_THREAD_SERIALIZED
};

RuntimeState& state() {
  static RuntimeState* const state = new RuntimeState();  // never destroyed: used from atexit
  return *state;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

// Open MPI's non-blocking all-reduce (coll/libnbc) picks a binomial tree (reduce to rank 0, then broadcast)
// whenever the call is in place — every all-reduce here is — which moves the whole buffer log2(n) times
// through one rank. Reduce-scatter + all-gather ("rabenseifner", algorithm 3) moves 2(n-1)/n of it per rank,
// as a ring does: measured on 2 ranks, 1.7x the bandwidth at 1 MB and 2.4x at 64 MB (docs/distributed.md).
// Set before MPI_Init, and only when the user has not chosen an algorithm.
void choose_nonblocking_algorithms() {
#ifdef OPEN_MPI
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
#endif
}

}  // namespace

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(length));
}

absl::Status MpiRuntime::check_matches(const LaunchEnv& env) const {
  if (world_.world_size == env.world_size && world_.rank == env.rank) return absl::OkStatus();
  const std::string hint = env.launcher == Launcher::kSlurm
                               ? "under srun, Open MPI needs the PMIx plugin (srun --mpi=pmix; `srun "
                                 "--mpi=list` shows what this Slurm "
                                 "offers), or start the job with mpirun inside the allocation"
                               : "is the program linked against the same MPI as the mpirun that started it?";
  return absl::FailedPreconditionError(
      fmt::format("{} started this process as {}, but MPI sees rank {} of {}: {}",
                  launcher_name(env.launcher), env.describe(), world_.rank, world_.world_size, hint));
}

absl::StatusOr<MpiRuntime*> MpiRuntime::get() {
  RuntimeState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.runtime != nullptr) return s.runtime;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return absl::FailedPreconditionError("MPI was already finalized in this process");
  int initialized = 0;
  MPI_Initialized(&initialized);
  auto* runtime = new MpiRuntime();
  if (initialized) {
    MPI_Query_thread(&runtime->thread_level_);  // the program initialized MPI itself; it also finalizes
  } else {
    choose_nonblocking_algorithms();
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &runtime->thread_level_) != MPI_SUCCESS) {
      delete runtime;
      return absl::UnavailableError("MPI_Init_thread failed (is this process started by mpirun or srun?)");
    }
    std::atexit(&MpiRuntime::finalize_at_exit);
  }
  if (runtime->thread_level_ < MPI_THREAD_SERIALIZED) {
    const int level = runtime->thread_level_;
    delete runtime;
    return absl::FailedPreconditionError(fmt::format(
        "the MPI library offers only {}; nanoforge's communication thread needs MPI_THREAD_SERIALIZED or "
        "MPI_THREAD_MULTIPLE (Open MPI built with thread support, e.g. Debian's libopenmpi3)",
        thread_level_name(level)));
  }
  s.serialized = runtime->thread_level_ < MPI_THREAD_MULTIPLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &runtime->world_.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &runtime->world_.world_size);
  MPI_Comm shared = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, runtime->world_.rank, MPI_INFO_NULL,
                          &shared) == MPI_SUCCESS) {
    MPI_Comm_rank(shared, &runtime->world_.local_rank);
    MPI_Comm_free(&shared);
  }
  s.runtime = runtime;
  return runtime;
}

std::unique_lock<std::mutex> MpiRuntime::call_lock() {
  RuntimeState& s = state();
  if (!s.serialized) return std::unique_lock<std::mutex>();
  return std::unique_lock<std::mutex>(s.call_mutex);
}

void MpiRuntime::mark_broken() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().broken = true;
}

bool MpiRuntime::broken() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().broken;
}

int MpiRuntime::add_stopper(std::function<void()> stop) {
  RuntimeState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const int handle = s.next_handle++;
  s.stoppers.emplace(handle, std::move(stop));
  return handle;
}

void MpiRuntime::remove_stopper(int handle) {
  RuntimeState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stoppers.erase(handle);
}

void MpiRuntime::finalize_at_exit() {
  RuntimeState& s = state();
  std::map<int, std::function<void()>> stoppers;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    stoppers.swap(s.stoppers);
  }
  for (auto& [handle, stop] : stoppers)
    stop();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.broken) return;  // a lost rank: MPI_Finalize would wait for it forever
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  ExitDeadline deadline(kFinalizeDeadlineSeconds,
                        "MPI_Finalize at exit (it waits for every rank: did one of them die?)");
  MPI_Finalize();
}

absl::Status MpiRuntime::broadcast_bytes(std::span<uint8_t> bytes, int root, double timeout_seconds) {
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  {
    auto lock = call_lock();
    rc = MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, MPI_COMM_WORLD, &request);
  }
  if (rc != MPI_SUCCESS) return absl::UnavailableError(fmt::format("MPI_Ibcast: {}", mpi_error_text(rc)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (true) {
    int done = 0;
    {
      auto lock = call_lock();
      rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS)
      return absl::UnavailableError(fmt::format("broadcast over MPI: {}", mpi_error_text(rc)));
    if (done) return absl::OkStatus();
    if (std::chrono::steady_clock::now() > deadline) {
      mark_broken();
      return absl::DeadlineExceededError(
          fmt::format("rank {}: the broadcast from rank {} over MPI did not complete within {} s: not every "
                      "rank reached it (one crashed or is stuck before creating its communicator)",
                      world_.rank, root, timeout_seconds));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace nanoforge
