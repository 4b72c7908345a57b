// Bringing the NCCL engine up on every rank: GPU binding, the unique id from rank 0 over MPI or the TCP
// rendezvous (with rank 0's heartbeat address under torchrun-style launches), and a non-blocking
// ncclCommInitRankConfig polled under the timeout. docs/distributed.md walks through it.
#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "dist/comm_watchdog.h"
#include "dist/mpi_runtime.h"
#include "dist/nccl_engine_parts.h"
#include "dist/tcp_heartbeats.h"
#include "dist/tcp_rendezvous.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// What rank 0 sends every rank at start-up: the NCCL id, and under torchrun-style launches where rank 0's
// heartbeat listener is.
struct StartupPayload {
  ncclUniqueId id;
  TcpHeartbeatAddress heartbeats;
};

// The payload from rank 0 to every rank: over MPI when MPI started the job, else the TCP rendezvous.
absl::Status share_startup_payload(const LaunchEnv& env, MpiRuntime* mpi, const RendezvousKey& key,
                                   StartupPayload& payload, double timeout_seconds) {
  auto* bytes = reinterpret_cast<uint8_t*>(&payload);
  if (mpi != nullptr) return mpi->broadcast_bytes({bytes, sizeof(payload)}, 0, timeout_seconds);
  RendezvousOptions options;
  options.master_addr = env.master_addr;
  options.master_port = env.master_port;
  options.rank = env.rank;
  options.world_size = env.world_size;
  options.timeout_seconds = timeout_seconds;
  options.key = key;
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<uint8_t> received,
                             tcp_rendezvous(options, {bytes, env.rank == 0 ? sizeof(payload) : 0}));
  if (received.size() != sizeof(payload)) {
    return absl::DataLossError(
        fmt::format("rendezvous: expected {} bytes (the NCCL id and the heartbeat "
                    "address) from rank 0, got {} bytes",
                    sizeof(payload), received.size()));
  }
  std::memcpy(bytes, received.data(), sizeof(payload));
  return absl::OkStatus();
}

// ncclCommInitRankConfig with blocking = 0, polled until every rank has joined or the timeout; a
// communicator that did not come up is aborted.
absl::Status init_communicator(ncclComm_t* comm, const LaunchEnv& env, const ncclUniqueId& id,
                               double timeout_seconds, const std::string& who) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  ncclResult_t result = ncclCommInitRankConfig(comm, env.world_size, id, env.rank, &config);
  while (result == ncclInProgress && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (ncclCommGetAsyncError(*comm, &result) != ncclSuccess) result = ncclInternalError;
  }
  if (result == ncclSuccess) return absl::OkStatus();
  const std::string text = result == ncclInProgress
                               ? fmt::format("not every rank joined within {} s", timeout_seconds)
                               : nccl_error_text(result, *comm);
  if (*comm != nullptr) {
    ExitDeadline abort_deadline(kNcclAbortDeadlineSeconds, fmt::format("{}: ncclCommAbort", who));
    ncclCommAbort(*comm);
  }
  note_communication_failure();
  return absl::UnavailableError(
      fmt::format("{}: ncclCommInitRankConfig over {} ranks: {}", who, env.world_size, text));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> create_nccl_communicator(const LaunchEnv& env,
                                                                       const DistOptions& options) {
  NcclParts parts;
  parts.rank = env.rank;
  parts.world_size = env.world_size;
  parts.local_rank = env.local_rank;
  MpiRuntime* mpi = nullptr;
  if (env.launched_by_mpi() && env.world_size > 1) {
    NANOFORGE_ASSIGN_OR_RETURN(mpi, MpiRuntime::get());
    NANOFORGE_RETURN_IF_ERROR(mpi->check_matches(env));
    parts.local_rank = mpi->world().local_rank;  // counted by MPI among the processes sharing this machine
  }
  // Torchrun-style: the rendezvous's key, checked before any CUDA work.
  RendezvousKey rendezvous_key;
  if (mpi == nullptr && env.world_size > 1) {
    absl::StatusOr<RendezvousKey> key = rendezvous_key_from_env(process_env);
    if (!key.ok())
      return absl::Status(key.status().code(),
                          fmt::format("{}: {}", env.describe(), std::string(key.status().message())));
    rendezvous_key = *std::move(key);
  }
  const std::string who = fmt::format("rank {}", env.rank);
  int gpus = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&gpus); error != cudaSuccess || gpus == 0) {
    return absl::UnavailableError(fmt::format("{}: the NCCL engine needs a GPU, and CUDA sees none: {}", who,
                                              error != cudaSuccess ? cuda_error_text(error) : "0 devices"));
  }
  if (parts.local_rank >= gpus) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return absl::FailedPreconditionError(
        fmt::format("{} is local rank {} and binds GPU {}, but this machine shows {} GPU(s) "
                    "(CUDA_VISIBLE_DEVICES={}): start "
                    "at most one rank per GPU on each machine",
                    who, parts.local_rank, parts.local_rank, gpus, visible != nullptr ? visible : "unset"));
  }
  // cudaSetDevice must precede ncclCommInitRank (and everything else that creates CUDA state).
  if (const cudaError_t error = cudaSetDevice(parts.local_rank); error != cudaSuccess) {
    return absl::UnavailableError(
        fmt::format("{}: cudaSetDevice({}): {}", who, parts.local_rank, cuda_error_text(error)));
  }
  StartupPayload payload{};
  const bool torchrun_style = mpi == nullptr && env.world_size > 1;
  if (env.rank == 0) {
    if (const ncclResult_t result = ncclGetUniqueId(&payload.id); result != ncclSuccess)
      return absl::UnavailableError(
          fmt::format("{}: ncclGetUniqueId: {}", who, nccl_error_text(result, nullptr)));
    if (torchrun_style) {
      NANOFORGE_ASSIGN_OR_RETURN(parts.tcp_heartbeats,
                                 TcpHeartbeats::listen(env.world_size, &payload.heartbeats));
    }
  }
  if (env.world_size > 1)
    NANOFORGE_RETURN_IF_ERROR(
        share_startup_payload(env, mpi, rendezvous_key, payload, options.timeout_seconds));
  if (torchrun_style && env.rank != 0) {
    NANOFORGE_ASSIGN_OR_RETURN(parts.tcp_heartbeats,
                               TcpHeartbeats::connect(env.master_addr, payload.heartbeats, env.rank,
                                                      env.world_size, options.timeout_seconds));
  }
  NANOFORGE_RETURN_IF_ERROR(init_communicator(&parts.comm, env, payload.id, options.timeout_seconds, who));
  int least_priority = 0;
  int greatest_priority = 0;
  cudaError_t cuda = cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority);
  // Non-blocking: the legacy default stream does not serialise with it, so collectives overlap the kernels.
  // Highest priority: a collective's kernels are scheduled ahead of compute kernels queued meanwhile.
  if (cuda == cudaSuccess)
    cuda = cudaStreamCreateWithPriority(&parts.stream, cudaStreamNonBlocking, greatest_priority);
  if (cuda == cudaSuccess) cuda = cudaEventCreateWithFlags(&parts.ready, cudaEventDisableTiming);
  if (cuda == cudaSuccess) cuda = cudaMalloc(reinterpret_cast<void**>(&parts.barrier_value), sizeof(float));
  if (cuda == cudaSuccess) cuda = cudaMemset(parts.barrier_value, 0, sizeof(float));
  if (cuda != cudaSuccess) {
    ncclCommAbort(parts.comm);  // frees it without waiting for the peers
    return absl::UnavailableError(
        fmt::format("{}: creating the NCCL stream: {}", who, cuda_error_text(cuda)));
  }
  if (mpi != nullptr) {
    ExitDeadline deadline(options.timeout_seconds, fmt::format("{}: creating the heartbeat channel", who));
    auto lock = MpiRuntime::call_lock();
    if (MPI_Comm_dup(MPI_COMM_WORLD, &parts.heartbeat_comm) != MPI_SUCCESS)
      return absl::UnavailableError(fmt::format("{}: MPI_Comm_dup for heartbeats failed", who));
    MPI_Comm_set_errhandler(parts.heartbeat_comm, MPI_ERRORS_RETURN);
  }
  return open_nccl_communicator(parts, options);
}

}  // namespace nanoforge
