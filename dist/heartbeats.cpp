// The lost-rank report shared by the heartbeat channels (heartbeats.h).
#include "dist/heartbeats.h"

#include <absl/strings/str_join.h>
#include <fmt/format.h>

namespace nanoforge {

std::string describe_missing_ranks(const std::vector<PeerHeard>& peers, uint64_t sequence,
                                   double silent_after_seconds) {
  std::vector<int> missing;
  std::vector<std::string> details;
  std::vector<std::string> silent;
  for (const PeerHeard& peer : peers) {
    const std::string gone = peer.disconnected ? ", its connection closed: the process is gone" : "";
    if (peer.latest < sequence + 1) {
      missing.push_back(peer.rank);
      details.push_back(peer.latest == 0
                            ? fmt::format("rank {}: never heard from{}", peer.rank, gone)
                            : fmt::format("rank {}: last at collective #{}, heard {:.1f} s ago{}", peer.rank,
                                          peer.latest - 1, peer.seconds_ago, gone));
    } else if (peer.disconnected || peer.seconds_ago > silent_after_seconds) {
      silent.push_back(fmt::format("rank {} ({} for {:.1f} s)", peer.rank,
                                   peer.disconnected ? "disconnected, silent" : "silent", peer.seconds_ago));
    }
  }
  if (!missing.empty()) {
    return fmt::format("{} {} did not arrive ({})", missing.size() == 1 ? "rank" : "ranks",
                       absl::StrJoin(missing, ", "), absl::StrJoin(details, "; "));
  }
  if (!silent.empty()) {
    return fmt::format("every rank arrived, then stopped answering during it: {}",
                       absl::StrJoin(silent, ", "));
  }
  return "every rank arrived at it and is still answering heartbeats: the transfer itself is stuck";
}

}  // namespace nanoforge
