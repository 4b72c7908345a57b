// What the NCCL bootstrap (dist/nccl_bootstrap.cpp: GPU binding, the unique id, ncclCommInitRankConfig)
// hands the engine (dist/nccl_communicator.cpp: collectives, watchdog, teardown), and the error texts both
// print. Private to dist/.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "dist/communicator.h"
#include "dist/tcp_heartbeats.h"

namespace nanoforge {

// How long ncclCommAbort may take before the process gives up on it (NCCL has had versions where abort
// hung, which is why PyTorch's default is to tear the process down without it).
constexpr double kNcclAbortDeadlineSeconds = 30;

// A communicator that has come up on every rank, with its stream, its events and its heartbeat channel.
struct NcclParts {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;
  float* barrier_value = nullptr;
  MPI_Comm heartbeat_comm = MPI_COMM_NULL;        // heartbeats over MPI, when MPI started the job
  std::shared_ptr<TcpHeartbeats> tcp_heartbeats;  // else heartbeats over TCP to rank 0
};

// The engine over `parts`, which it owns from now on.
std::unique_ptr<Communicator> open_nccl_communicator(const NcclParts& parts, const DistOptions& options);

std::string cuda_error_text(cudaError_t error);
// NCCL's text for `result`, with the communicator's last error when it has one (`comm` may be null).
std::string nccl_error_text(ncclResult_t result, ncclComm_t comm);

}  // namespace nanoforge
