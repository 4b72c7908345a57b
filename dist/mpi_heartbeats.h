// The side channel that names lost ranks: at every collective a rank tells every peer "I am at collective
// #s" with a small point-to-point message (its own communicator and tag, so it never mixes with the
// collective's traffic), and repeats it while the collective runs. When a collective stalls, the peers whose
// latest heartbeat is older than it did not arrive; peers that arrived but fell silent died during it.
// Costs world_size - 1 eight-byte messages per collective and per watchdog tick.
//
// One thread uses it, holding MpiRuntime::call_lock() around announce() and poll(); describe_missing() is
// safe from another thread (the watchdog) meanwhile.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "dist/heartbeats.h"

namespace nanoforge {

class MpiHeartbeats final : public Heartbeats {
 public:
  // `comm` is a communicator of its own (a duplicate of the world), used for nothing else.
  MpiHeartbeats(MPI_Comm comm, int rank, int world_size);
  ~MpiHeartbeats() override;
  MpiHeartbeats(const MpiHeartbeats&) = delete;
  MpiHeartbeats& operator=(const MpiHeartbeats&) = delete;

  // Tells every peer this rank is at collective `sequence` (non-blocking sends).
  void announce(uint64_t sequence) override;
  // Takes in arrived heartbeats and retires finished sends. Returns how many peers reached `sequence` (or
  // later) for the first time during this call: progress for the watchdog.
  int poll(uint64_t sequence) override;
  // For the watchdog: "rank 3 did not arrive (...)", or what is known when every peer arrived.
  std::string describe_missing(uint64_t sequence, double silent_after_seconds) const override;
  // After a lost rank, MPI calls may fail or hang: the destructor then leaves the requests alone.
  void abandon() override { abandoned_ = true; }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kTag = 7;  // any tag: the communicator carries nothing else
  // Sends not yet finished beyond this many (a peer that stopped receiving) are not added to.
  static constexpr size_t kMaxPendingSendsPerPeer = 64;

  struct Peer {
    uint64_t received = 0;  // receive buffer
    MPI_Request receive = MPI_REQUEST_NULL;
    std::atomic<uint64_t> latest{0};  // 1 + the latest sequence heard (0: never heard)
    std::atomic<int64_t> heard_at_ns{0};
  };
  struct PendingSend {
    uint64_t value;
    MPI_Request request;
  };

  void post_receive(int peer);

  MPI_Comm comm_;
  int rank_;
  int world_size_;
  std::unique_ptr<Peer[]> peers_;
  std::deque<std::unique_ptr<PendingSend>> sends_;
  bool abandoned_ = false;
};

}  // namespace nanoforge
