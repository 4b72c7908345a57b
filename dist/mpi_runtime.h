// MPI itself, once per process: MPI_Init_thread on first use and MPI_Finalize at exit, the thread level, the
// world as MPI sees it, and a byte broadcast with a deadline (the NCCL engine's id exchange). Communicators
// register here so that their threads stop before MPI_Finalize runs. MPI_THREAD_MULTIPLE is requested, as
// several threads call MPI; under MPI_THREAD_SERIALIZED every MPI call of dist/ holds call_lock()
// (docs/distributed.md says why).
#pragma once

#include <absl/status/statusor.h>
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>

#include "dist/launch_env.h"

namespace nanoforge {

struct MpiWorld {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes sharing this machine (MPI_COMM_TYPE_SHARED)
};

class MpiRuntime {
 public:
  // Initializes MPI on the first call (and registers MPI_Finalize at exit); later calls return the same.
  static absl::StatusOr<MpiRuntime*> get();

  int thread_level() const { return thread_level_; }
  const MpiWorld& world() const { return world_; }
  // Fails when MPI's world is not the one the launcher's variables describe (e.g. srun without PMIx starts N
  // singleton MPI processes), saying what to do about it.
  absl::Status check_matches(const LaunchEnv& env) const;

  // Held around every MPI call when the library is only MPI_THREAD_SERIALIZED; an empty lock otherwise.
  static std::unique_lock<std::mutex> call_lock();

  // A collective failed (a rank was lost): MPI_Finalize would wait for the lost rank, so exit skips it.
  static void mark_broken();
  static bool broken();

  // Called at exit before MPI_Finalize, for communicators still alive then (they stop their threads).
  // Returns a handle for remove_stopper().
  static int add_stopper(std::function<void()> stop);
  static void remove_stopper(int handle);

  // Rank `root`'s bytes to every rank of MPI_COMM_WORLD, failing after `timeout_seconds` when a rank does not
  // take part.
  absl::Status broadcast_bytes(std::span<uint8_t> bytes, int root, double timeout_seconds);

 private:
  MpiRuntime() = default;
  static void finalize_at_exit();

  int thread_level_ = 0;
  MpiWorld world_;
};

// The text of an MPI error code ("MPI_ERR_PROC_FAILED: ..."), for messages.
std::string mpi_error_text(int code);

}  // namespace nanoforge
