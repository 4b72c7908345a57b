// The heartbeat channel of jobs started torchrun-style, where there is no MPI: every rank keeps one TCP
// connection to rank 0 and tells it "I am at collective #s"; rank 0 sends every rank the table of what it
// heard from all (the latest collective, how long ago, whether the connection closed), so that any survivor
// names a lost rank, and a closed connection to rank 0 names rank 0. Rank 0 listens on an ephemeral port
// that travels in the rendezvous's authenticated payload with a random token, which admits only the job's
// ranks. All I/O is non-blocking: a peer that stops reading loses tables, never blocks the channel.
#pragma once

#include <absl/status/statusor.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/heartbeats.h"

namespace nanoforge {

// Where rank 0's heartbeat listener is, as the rendezvous's payload carries it.
struct TcpHeartbeatAddress {
  uint16_t port = 0;
  std::array<uint8_t, 16> token{};
};

class TcpHeartbeats final : public Heartbeats {
 public:
  // Rank 0: listens on every interface before the rendezvous, whose payload then carries `address`.
  static absl::StatusOr<std::unique_ptr<TcpHeartbeats>> listen(int world_size, TcpHeartbeatAddress* address);
  // Every other rank: connects to rank 0 (which listens already) within `timeout_seconds`.
  static absl::StatusOr<std::unique_ptr<TcpHeartbeats>> connect(const std::string& master_addr,
                                                                const TcpHeartbeatAddress& address, int rank,
                                                                int world_size, double timeout_seconds);
  ~TcpHeartbeats() override;

  void announce(uint64_t sequence) override;
  int poll(uint64_t sequence) override;
  std::string describe_missing(uint64_t sequence, double silent_after_seconds) const override;
  void abandon() override {}

 private:
  using Clock = std::chrono::steady_clock;
  // One socket with what is not yet read or written (messages have fixed sizes).
  struct Connection {
    int fd = -1;
    std::string in;
    std::string out;
  };
  struct Peer {
    Connection connection;  // rank 0: the peer's connection
    uint64_t latest = 0;    // 1 + its latest collective (0: never heard from)
    Clock::time_point heard_at;
    bool disconnected = false;
  };

  TcpHeartbeats(int rank, int world_size);
  void accept_new();
  int take_announcements(uint64_t sequence);
  void send_tables();
  int take_tables(uint64_t sequence);

  const int rank_;
  const int world_size_;
  int listener_ = -1;                     // rank 0
  std::array<uint8_t, 16> token_{};       // rank 0: what a peer's hello must carry
  std::vector<Connection> unidentified_;  // rank 0: accepted, hello not yet complete
  mutable std::mutex mutex_;              // guards peers_ (read by describe_missing on the watchdog thread)
  std::vector<Peer> peers_;               // by rank; on other ranks, what rank 0's latest table said
  Connection to_root_;                    // other ranks
};

}  // namespace nanoforge
