// Rank 0's side of the TCP rendezvous (private to dist/; tcp_rendezvous.h is the interface).
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <span>
#include <vector>

#include "dist/tcp_io.h"
#include "dist/tcp_rendezvous.h"

namespace nanoforge {

// Listens on options.master_port, admits every other rank once it has authenticated, and sends each the
// authenticated `payload`; returns the payload. Fails at `deadline`, or at once when a rank contradicts rank
// 0's settings (every admitted rank then learns why).
absl::StatusOr<std::vector<uint8_t>> serve_rendezvous(const RendezvousOptions& options,
                                                      TcpClock::time_point deadline,
                                                      std::span<const uint8_t> payload);

}  // namespace nanoforge
