// The NCCL engine: collectives over CUDA buffers (bf16, f32; also f64 and i32) for one process per GPU. Each
// rank binds GPU `local_rank`; the ncclUniqueId travels from rank 0 over MPI when mpirun or srun started the
// job, else over the TCP rendezvous (dist/tcp_rendezvous.h). Collectives run on the communicator's own
// non-blocking, high-priority CUDA stream, ordered after the caller's work on the default stream (where the
// CUDA kernels run) by an event; CommWork::wait waits for the event recorded after the collective; kAverage
// is ncclAvg. The watchdog (dist/comm_watchdog.h) polls those events and ncclCommGetAsyncError, and calls
// ncclCommAbort when a collective is stuck past the timeout; under MPI, heartbeats name the lost ranks.
// Compiled only when NANOFORGE_HAVE_CUDA.
#pragma once

#include <absl/status/statusor.h>

#include <memory>

#include "dist/communicator.h"
#include "dist/launch_env.h"

namespace nanoforge {

// Creates the engine for the job `env` describes (a world of one is allowed: NCCL on a single GPU).
absl::StatusOr<std::unique_ptr<Communicator>> create_nccl_communicator(const LaunchEnv& env,
                                                                       const DistOptions& options);

}  // namespace nanoforge
