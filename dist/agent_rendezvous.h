// The launch agents' rendezvous (one agent per machine, launch/agent.h): membership in rounds. The agent on
// the machine named by --rdzv-endpoint that binds its port first hosts it; every agent, the host's own
// included, joins each round over a connection that the TCP rendezvous's challenge, hello and reply
// authenticate (rendezvous_protocol.h, under the agents' key). Then the connection carries one-byte
// heartbeats and verdicts until the round ends; docs/launch.md gives the rules.
#pragma once

#include <absl/status/statusor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/rendezvous_io.h"
#include "dist/rendezvous_protocol.h"

namespace nanoforge {

struct AgentRendezvousOptions {
  std::string host;  // --rdzv-endpoint HOST:PORT
  int port = 0;
  int min_nodes = 1;  // --nnodes MIN:MAX
  int max_nodes = 1;
  double join_timeout_seconds = 600;  // a round with fewer than MIN agents after this fails
  double last_call_seconds = 2;       // once MIN are in, how long the host waits for one more
  double silence_seconds = 10;        // an agent (or the host) not heard for this long is lost
  double hello_timeout_seconds = 5;   // from a connection's accept to its complete hello
  RendezvousKey key;                  // agents_rendezvous_key of the job's key
};

// What one round tells one agent.
struct AgentMembership {
  int round = 0;  // 1 for the first membership this host formed
  int nnodes = 0;
  int node_rank = 0;
  int nproc_per_node = 0;
  std::string master_addr;  // node 0's machine, as the host sees it, and the port its rank 0 listens on
  int master_port = 0;
  std::vector<int> previous_node_ranks;  // by node rank: that agent's node rank in its previous round, or -1
};

// What the host decided about the running round, as an agent learns it.
enum class AgentVerdict {
  kNone,    // nothing yet: the round goes on
  kReform,  // an agent failed or vanished: stop the ranks and join the next round
  kJoin,    // a machine waits to join: stop the ranks at their next step (a checkpoint), join the next round
  kFinished,  // every agent's ranks finished: the job is done
  kHostLost,  // the host closed the connection or went silent: stop the ranks and join again (a new host)
};

// The host's side, serving on a thread of its own for as long as it lives.
class AgentRendezvousHost {
 public:
  // Hosts the rendezvous when options.host is an address of this machine and its port is free; nullptr when
  // it is another machine's or another agent here holds the port.
  static absl::StatusOr<std::unique_ptr<AgentRendezvousHost>> start_if_here(
      const AgentRendezvousOptions& options);
  virtual ~AgentRendezvousHost() = default;
  // Once the job is over as the host sees it: OK when every agent's ranks finished, else why no round formed
  // (fewer than MIN within the join timeout). nullopt while it goes on.
  virtual std::optional<absl::Status> job_outcome() const = 0;
};

// One agent's membership of one round, and the connection that watches it.
class AgentLink {
 public:
  // Joins the next round: `previous_node_rank` is this agent's node rank in its last round (-1: none), so
  // that the host keeps the survivors' order. Fails with the host's reason when it refused (fewer than MIN
  // agents within the join timeout, another --nproc-per-node), or when no host answered in time.
  static absl::StatusOr<AgentLink> join(const AgentRendezvousOptions& options, int nproc_per_node,
                                        int previous_node_rank);

  const AgentMembership& membership() const { return membership_; }
  // Tells the host that this agent's ranks failed (a re-formation follows) or all finished.
  void report_failed();
  void report_done();
  // Sends a heartbeat when one is due, reads what the host sent, waiting up to `wait_seconds`.
  AgentVerdict poll(double wait_seconds);
  // Why the host ended the round (kReform, kJoin): "node 2 (10.0.0.7) closed its connection".
  const std::string& verdict_reason() const { return verdict_reason_; }

 private:
  AgentLink(rendezvous_io::Socket socket, AgentMembership membership, const AgentRendezvousOptions& options);
  void send_byte(uint8_t byte);

  rendezvous_io::Socket socket_;
  AgentMembership membership_;
  double silence_seconds_ = 10;
  TcpClock::time_point heard_{}, sent_{};
  std::vector<uint8_t> inbox_;  // bytes read, up to an incomplete reason
  std::string verdict_reason_;
};

}  // namespace nanoforge
