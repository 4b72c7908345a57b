// A torchrun-style rendezvous for clusters without a working MPI (llm.c added the same for Slurm sites whose
// srun cannot start Open MPI jobs): rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects
// (retrying until rank 0 is up) and proves it holds the job's key (dist/rendezvous_protocol.h); once all
// world_size - 1 ranks have, rank 0 sends each of them the payload (the NCCL unique id), authenticated too.
// Connections that do not authenticate (garbage, another job, a replay, a client too slow) are refused and
// reported without stopping the rendezvous. Every step has a deadline, and errors name the peer's address.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "dist/rendezvous_protocol.h"

namespace nanoforge {

struct RendezvousOptions {
  std::string master_addr;  // where rank 0 is reachable (it listens on every interface)
  int master_port = 0;
  int rank = 0;
  int world_size = 1;
  double timeout_seconds = 300;
  RendezvousKey key;  // the job's key (rendezvous_key_from_env); required when world_size > 1
  // How long a connection may take from its accept to a complete hello (a stray or slow client's share).
  double hello_timeout_seconds = 10;
  // Rank 0 reports here each connection it refused, naming the peer's address; the rendezvous goes on.
  // Unset: a line on stderr.
  std::function<void(const std::string&)> on_refused;
};

// Rank 0 passes the payload (at most kRendezvousMaxDataBytes) and gets it back; other ranks pass nothing and
// receive it.
absl::StatusOr<std::vector<uint8_t>> tcp_rendezvous(const RendezvousOptions& options,
                                                    std::span<const uint8_t> payload);

}  // namespace nanoforge
