// What the watchdog's engines ask of a heartbeat channel, over MPI (mpi_heartbeats.h) or, for jobs started
// torchrun-style, over TCP to rank 0 (tcp_heartbeats.h): tell the peers which collective this rank is at,
// take in theirs, and name the ranks that did not arrive at a stalled collective. One thread calls announce()
// and poll(); describe_missing() is safe from another thread (the watchdog) meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge {

class Heartbeats {
 public:
  virtual ~Heartbeats() = default;
  // Tells every peer this rank is at collective `sequence`.
  virtual void announce(uint64_t sequence) = 0;
  // Takes in arrived heartbeats. Returns how many peers reached `sequence` (or later) for the first time
  // during this call: progress for the watchdog.
  virtual int poll(uint64_t sequence) = 0;
  // For the watchdog: "rank 3 did not arrive (...)", or what is known when every peer arrived.
  virtual std::string describe_missing(uint64_t sequence, double silent_after_seconds) const = 0;
  // After a lost rank the channel may be broken: the destructor then leaves it alone.
  virtual void abandon() = 0;
};

// What a rank knows of one peer, for the report.
struct PeerHeard {
  int rank = 0;
  uint64_t latest = 0;        // 1 + the latest collective it announced (0: never heard from)
  double seconds_ago = 0;     // since it was last heard
  bool disconnected = false;  // its heartbeat connection closed (TCP): its process is gone
};

// The report both channels give: the peers that did not arrive at `sequence`, else those silent for longer
// than `silent_after_seconds` during it.
std::string describe_missing_ranks(const std::vector<PeerHeard>& peers, uint64_t sequence,
                                   double silent_after_seconds);

}  // namespace nanoforge
