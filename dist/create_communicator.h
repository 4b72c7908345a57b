// The factory of communicators: the engine for how this process was started.
#pragma once

#include <absl/status/statusor.h>

#include <memory>

#include "dist/communicator.h"

namespace nanoforge {

// The communicator for how this process was started: under mpirun / srun (MPI; NCCL for CUDA tensors when
// built with CUDA), torchrun-style RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, or a single process.
absl::StatusOr<std::unique_ptr<Communicator>> create_communicator(Device device, const DistOptions& options);

}  // namespace nanoforge
