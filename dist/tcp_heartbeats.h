// The heartbeat channel of jobs started torchrun-style, where there is no MPI: every rank keeps one TCP
// connection to rank 0 and tells it "I am at collective #s"; rank 0 sends every rank the table of what it
// heard from all, so that any survivor names a lost rank (and a closed connection to rank 0 names rank 0).
// Rank 0's port is open to anyone who can reach its machine: its own thread admits a connection only once
// its hello has proved the job's key for this run, and a flood costs rank 0 neither its descriptors nor the
// ranks' heartbeats. All I/O after the handshake is non-blocking. docs/distributed.md has the protocol and
// its bounds.
#pragma once

#include <absl/status/statusor.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/heartbeats.h"
#include "dist/rendezvous_protocol.h"

namespace nanoforge {

// Where rank 0's heartbeat port is, as the rendezvous's authenticated payload carries it.
struct TcpHeartbeatAddress {
  uint16_t port = 0;
  HeartbeatSession session{};  // rank 0's random id of this run: every rank's hello is bound to it
};

// How rank 0 guards its heartbeat port.
struct TcpHeartbeatPortOptions {
  // From accept to a complete hello (a rank sends it as it connects); slower connections are closed.
  double hello_timeout_seconds = 5;
  // Each connection rank 0 refused, naming the peer's address and why (called on the port's thread). Unset:
  // the first on stderr, then how many more at most once a minute, so that a flood cannot fill the log.
  std::function<void(const std::string&)> on_refused;
};

class TcpHeartbeats final : public Heartbeats {
 public:
  // Rank 0: listens on every interface before the rendezvous, whose payload then carries `address`, and
  // serves the port until destroyed. `key` is the rendezvous's.
  static absl::StatusOr<std::unique_ptr<TcpHeartbeats>> listen(const RendezvousKey& key, int world_size,
                                                               TcpHeartbeatAddress* address,
                                                               TcpHeartbeatPortOptions options = {});
  // Every other rank: connects to rank 0 (which serves its port already) and authenticates both ways within
  // `timeout_seconds`, connecting again when rank 0 closed the connection first (a flood on its port).
  static absl::StatusOr<std::unique_ptr<TcpHeartbeats>> connect(const RendezvousKey& key,
                                                                const std::string& master_addr,
                                                                const TcpHeartbeatAddress& address, int rank,
                                                                int world_size, double timeout_seconds);
  // The same with the job's key from the environment, as the rendezvous found it (rendezvous_key_from_env).
  static absl::StatusOr<std::unique_ptr<TcpHeartbeats>> listen(int world_size, TcpHeartbeatAddress* address);
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
  // Rank 0: a connection to the port that has not authenticated yet.
  struct Handshake {
    int fd = -1;
    std::string address;  // the peer's, for reports
    Clock::time_point deadline;
    std::vector<uint8_t> received;
    size_t expected_bytes = kRendezvousHeaderBytes;  // the header's, then the header's and the hello's
  };

  TcpHeartbeats(int rank, int world_size);
  int take_announcements(uint64_t sequence);
  void send_tables();
  int take_tables(uint64_t sequence);

  // Rank 0's port thread and what only it touches.
  void serve_port();
  void accept_connections();
  bool receive_hello(Handshake& handshake);
  void close_late_handshakes();
  size_t most_waiting() const;
  void refuse(Handshake& handshake, const std::string& why);
  void report(const std::string& line);
  void flush_report();

  const int rank_;
  const int world_size_;
  RendezvousKey key_;
  HeartbeatSession session_{};
  TcpHeartbeatPortOptions port_options_;
  int listener_ = -1;  // rank 0
  int port_ = 0;
  int wake_fd_ = -1;  // rank 0: an eventfd that stops the port thread
  std::atomic<bool> stopping_{false};
  std::thread port_thread_;
  std::deque<Handshake> handshakes_;         // port thread: oldest first
  std::vector<uint32_t> admitted_attempt_;   // port thread: by rank, the latest admitted (0: none yet)
  Clock::time_point accept_paused_until_{};  // port thread: after accept() found no descriptor
  int64_t unreported_ = 0;                   // port thread: refusals not yet on stderr
  std::string last_unreported_;
  Clock::time_point reported_at_{};
  bool reported_once_ = false;

  mutable std::mutex mutex_;  // guards peers_ (admitted by the port thread, read by the watchdog thread)
  std::vector<Peer> peers_;   // by rank; on other ranks, what rank 0's latest table said
  Connection to_root_;        // other ranks
};

}  // namespace nanoforge
