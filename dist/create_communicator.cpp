// create_communicator: which engine serves this process, decided from how it was launched and where its
// buffers live. Apart from communicator.h so that the interface does not include the engines built on it.
#include "dist/create_communicator.h"

#include <fmt/format.h>

#include "dist/launch_env.h"
#include "dist/mpi_communicator.h"
#include "dist/single_communicator.h"
#ifdef NANOFORGE_HAVE_CUDA
#include "dist/nccl_communicator.h"
#endif

namespace nanoforge {

absl::StatusOr<std::unique_ptr<Communicator>> create_communicator(Device device, const DistOptions& options) {
  if (!(options.timeout_seconds > 0)) {
    return absl::InvalidArgumentError(
        fmt::format("dist.timeout_seconds must be positive, got {}", options.timeout_seconds));
  }
  absl::StatusOr<LaunchEnv> env = launch_env_from_process();
  if (!env.ok()) return env.status();
  if (env->world_size == 1) return std::unique_ptr<Communicator>(new SingleCommunicator(device));
  if (device == Device::kCpu) {
    if (!env->launched_by_mpi()) {
      return absl::FailedPreconditionError(
          fmt::format("{}: training on CPUs across processes uses the MPI engine, which needs the job "
                      "started by mpirun or "
                      "srun; torchrun-style variables are only enough for CUDA (NCCL) training",
                      env->describe()));
    }
    return create_mpi_communicator(*env, options);
  }
#ifdef NANOFORGE_HAVE_CUDA
  return create_nccl_communicator(*env, options);
#else
  return absl::FailedPreconditionError(fmt::format(
      "{}: CUDA tensors need the NCCL engine, and this build has no CUDA backend", env->describe()));
#endif
}

}  // namespace nanoforge
