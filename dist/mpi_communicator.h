// The MPI engine: collectives over CPU buffers (f32, f64, i32) for a job started by mpirun or srun, so the
// CPU backend trains data-parallel for real and every distributed test runs in CI. One communication thread
// per communicator runs the queued collectives in order with MPI's non-blocking collectives
// (MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ibcast, MPI_Ibarrier), polling MPI_Test,
// so the compute thread never blocks in MPI while it runs backward; kAverage is the sum scaled by
// 1 / world_size on that thread. Heartbeats (dist/mpi_heartbeats.h) and a watchdog (dist/comm_watchdog.h)
// turn a lost rank into an error that names it. MPI itself: dist/mpi_runtime.h.
#pragma once

#include <absl/status/statusor.h>

#include <memory>

#include "dist/communicator.h"
#include "dist/launch_env.h"

namespace nanoforge {

// Initializes MPI if needed and creates the engine over all of MPI_COMM_WORLD (every rank must call it, in
// the same order as its other communicators). Fails when MPI's world is not the one `env` describes.
absl::StatusOr<std::unique_ptr<Communicator>> create_mpi_communicator(const LaunchEnv& env,
                                                                      const DistOptions& options);

}  // namespace nanoforge
