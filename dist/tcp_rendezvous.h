// A torchrun-style rendezvous for clusters without a working MPI (llm.c added the same for Slurm sites whose
// srun cannot start Open MPI jobs): rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects
// (retrying until rank 0 is up) and introduces itself; once all world_size - 1 peers have, rank 0 sends each
// of them the payload (the NCCL unique id). Every step has a deadline, and errors say which ranks were
// missing or what did not match.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace nanoforge {

struct RendezvousOptions {
  std::string master_addr;  // where rank 0 is reachable (it listens on every interface)
  int master_port = 0;
  int rank = 0;
  int world_size = 1;
  double timeout_seconds = 300;
};

// Rank 0 passes the payload and gets it back; other ranks pass nothing and receive it.
absl::StatusOr<std::vector<uint8_t>> tcp_rendezvous(const RendezvousOptions& options,
                                                    std::span<const uint8_t> payload);

}  // namespace nanoforge
