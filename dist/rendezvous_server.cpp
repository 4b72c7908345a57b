// Rank 0's side of the TCP rendezvous: non-blocking sockets driven by poll() against deadlines. Rank 0 serves
// every connection at once, so a slow or hostile client holds up no one: each connection gets a challenge and
// has hello_timeout_seconds to answer it, at most kMaxPendingConnections wait at a time, and ranks that
// authenticated are watched for hang-ups (which free their slot) until all have come.
#include "dist/rendezvous_server.h"

#include <absl/strings/str_join.h>
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "dist/rendezvous_io.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using Clock = TcpClock;
using rendezvous_io::errno_text;
using rendezvous_io::listen_on;
using rendezvous_io::send_all;
using rendezvous_io::Socket;

constexpr auto kVerdictSending = std::chrono::seconds(1);  // best effort: a refused peer learns why
// Connections waiting to authenticate at once; more are closed at once, so that a flood of connections
// cannot exhaust rank 0's file descriptors (the rank they keep out retries).
constexpr size_t kMaxPendingConnections = 64;

// A connection rank 0 accepted: challenged, then reading its hello, then (authenticated) holding a rank.
struct Connection {
  Socket socket;
  std::string address;
  RendezvousNonce challenge{};
  Clock::time_point hello_deadline;
  std::vector<uint8_t> received;                   // the hello so far
  size_t expected_bytes = kRendezvousHeaderBytes;  // the header's, then the header's and the body's
  RendezvousNonce hello_nonce{};                   // once authenticated: what rank 0's reply covers
};

class RendezvousServer {
 public:
  RendezvousServer(const RendezvousOptions& options, Clock::time_point deadline, Socket listener)
      : options_(options),
        deadline_(deadline),
        listener_(std::move(listener)),
        ranks_(static_cast<size_t>(options.world_size)) {}

  absl::StatusOr<std::vector<uint8_t>> run(std::span<const uint8_t> payload) {
    while (admitted_ < options_.world_size - 1) {
      drop_slow_connections();
      if (Clock::now() >= deadline_) return fail(missing_ranks_problem(), nullptr);
      NANOFORGE_RETURN_IF_ERROR(serve_once());
      if (!problem_.ok()) return problem_;
    }
    const RendezvousReply accepted{.accepted = true, .data = {payload.begin(), payload.end()}};
    for (int rank = 1; rank < options_.world_size; ++rank) {
      Connection& peer = *ranks_[static_cast<size_t>(rank)];
      const std::vector<uint8_t> reply =
          encode_reply(options_.key, peer.challenge, peer.hello_nonce, accepted);
      if (absl::Status sent = send_all(peer.socket.fd(), reply, deadline_, "the payload"); !sent.ok()) {
        return absl::UnavailableError(fmt::format("rendezvous: sending to rank {} at {}: {}", rank,
                                                  peer.address, std::string(sent.message())));
      }
    }
    return std::vector<uint8_t>(payload.begin(), payload.end());
  }

 private:
  // One poll() over the listener, the connections still saying hello and the admitted ranks.
  absl::Status serve_once() {
    std::vector<pollfd> fds;
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const Connection& connection : pending_)
      fds.push_back({connection.socket.fd(), POLLIN, 0});
    std::vector<int> admitted_ranks;
    for (int rank = 1; rank < options_.world_size; ++rank) {
      if (!ranks_[static_cast<size_t>(rank)]) continue;
      fds.push_back({ranks_[static_cast<size_t>(rank)]->socket.fd(), POLLIN, 0});
      admitted_ranks.push_back(rank);
    }
    Clock::time_point wake = deadline_;
    for (const Connection& connection : pending_)
      wake = std::min(wake, connection.hello_deadline);
    const int ready = ::poll(fds.data(), fds.size(), tcp_remaining_ms(wake));
    if (ready < 0) {
      if (errno == EINTR) return absl::OkStatus();
      return absl::UnavailableError(fmt::format("rendezvous: poll: {}", errno_text(errno)));
    }
    // Admitted ranks first (their indices in `fds` follow the pending connections', which change below).
    const size_t first_admitted = 1 + pending_.size();
    for (size_t i = 0; i < admitted_ranks.size(); ++i)
      if (fds[first_admitted + i].revents != 0) check_admitted(admitted_ranks[i]);
    for (size_t i = pending_.size(); i-- > 0;) {
      if (fds[1 + i].revents == 0) continue;
      if (receive_hello(pending_[i])) pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      if (!problem_.ok()) return absl::OkStatus();
    }
    if (fds[0].revents & POLLIN) accept_one();
    return absl::OkStatus();
  }

  void accept_one() {
    Socket socket(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!socket.valid()) return;  // the peer gave up meanwhile
    Connection connection;
    connection.socket = std::move(socket);
    connection.address = tcp_peer_address(connection.socket.fd());
    if (pending_.size() >= kMaxPendingConnections) {
      refused(connection, fmt::format("{} connections already wait to authenticate", pending_.size()));
      return;
    }
    tcp_set_no_delay(connection.socket.fd());
    absl::StatusOr<RendezvousNonce> nonce = random_rendezvous_nonce();
    if (!nonce.ok()) {
      refused(connection, std::string(nonce.status().message()));
      return;
    }
    connection.challenge = *nonce;
    connection.hello_deadline = std::min(deadline_, tcp_deadline_after(options_.hello_timeout_seconds));
    // 32 bytes into a fresh connection's empty send buffer: sent whole, or the connection is already gone.
    const std::vector<uint8_t> challenge = encode_challenge({.nonce = connection.challenge});
    const ssize_t sent = ::send(connection.socket.fd(), challenge.data(), challenge.size(), MSG_NOSIGNAL);
    if (sent != static_cast<ssize_t>(challenge.size())) {
      refused(connection,
              fmt::format("sending the challenge: {}", sent < 0 ? errno_text(errno) : "partial send"));
      return;
    }
    pending_.push_back(std::move(connection));
  }

  // Reads what a connection sent. True when it is settled (admitted or refused), false while its hello is
  // incomplete. Sets problem_ when an authenticated rank contradicts rank 0's own settings.
  bool receive_hello(Connection& connection) {
    while (connection.received.size() < connection.expected_bytes) {
      std::array<uint8_t, 256> buffer;
      const size_t wanted = std::min(buffer.size(), connection.expected_bytes - connection.received.size());
      const ssize_t got = ::recv(connection.socket.fd(), buffer.data(), wanted, 0);
      // A peer that closes before reading the challenge resets the connection instead: the same to us.
      if (got == 0 || (got < 0 && errno == ECONNRESET)) {
        refused(connection,
                fmt::format("it closed the connection before its hello was complete ({} of {} bytes)",
                            connection.received.size(), connection.expected_bytes));
        return true;
      }
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) return false;
        refused(connection, fmt::format("receiving its hello: {}", errno_text(errno)));
        return true;
      }
      connection.received.insert(connection.received.end(), buffer.begin(), buffer.begin() + got);
      if (connection.received.size() == kRendezvousHeaderBytes &&
          connection.expected_bytes == kRendezvousHeaderBytes) {
        absl::StatusOr<size_t> length =
            parse_rendezvous_header(connection.received, RendezvousMessage::kHello);
        if (!length.ok()) {
          refused(connection, std::string(length.status().message()));
          return true;
        }
        connection.expected_bytes += *length;
      }
    }
    const std::span<const uint8_t> body =
        std::span<const uint8_t>(connection.received).subspan(kRendezvousHeaderBytes);
    absl::StatusOr<RendezvousHello> hello = parse_hello_body(body);
    if (!hello.ok()) {
      refused(connection, std::string(hello.status().message()));
      return true;
    }
    connection.hello_nonce = hello->nonce;
    if (absl::Status authentic = authenticate_hello(*hello, options_.key, connection.challenge);
        !authentic.ok()) {
      // Signed with rank 0's key: a rank of this job started with another key learns that the keys differ.
      tell(connection,
           {.accepted = false, .data = text_bytes("rank 0 could not authenticate this rank's hello")});
      refused(connection, std::string(authentic.message()));
      return true;
    }
    // A rank of this job: what it says must agree with rank 0, or the launch is wrong.
    const uint32_t rank = hello->rank;
    std::string problem;
    if (static_cast<int64_t>(hello->world_size) != options_.world_size) {
      problem = fmt::format("rank {} (at {}) was started with WORLD_SIZE={} but rank 0 with WORLD_SIZE={}",
                            rank, connection.address, hello->world_size, options_.world_size);
    } else if (rank == 0 || static_cast<int64_t>(rank) >= options_.world_size) {
      problem = fmt::format("a peer at {} says it is rank {}, which is not a rank in 1..{}",
                            connection.address, rank, options_.world_size - 1);
    } else if (ranks_[rank]) {
      problem =
          fmt::format("two processes say they are rank {}, at {} and {} (check RANK in the launch script)",
                      rank, ranks_[rank]->address, connection.address);
    }
    if (!problem.empty()) {
      problem_ = fail(problem, &connection).status();
      return true;
    }
    ranks_[rank] = std::move(connection);
    ++admitted_;
    return true;
  }

  // An admitted rank should be silent until its reply: a hang-up frees its slot (it may come again).
  void check_admitted(int rank) {
    Connection& connection = *ranks_[static_cast<size_t>(rank)];
    uint8_t byte = 0;
    const ssize_t got = ::recv(connection.socket.fd(), &byte, 1, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    note(fmt::format("rank {} at {} {} before every rank had come; its slot is free again", rank,
                     connection.address, got > 0 ? "sent bytes after its hello" : "hung up"));
    ranks_[static_cast<size_t>(rank)].reset();
    --admitted_;
  }

  void drop_slow_connections() {
    const auto now = Clock::now();
    for (size_t i = pending_.size(); i-- > 0;) {
      Connection& connection = pending_[i];
      if (connection.hello_deadline > now) continue;
      refused(connection,
              fmt::format("it sent {} of {} bytes of its hello within {} s", connection.received.size(),
                          connection.expected_bytes, options_.hello_timeout_seconds));
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    }
  }

  std::string missing_ranks_problem() const {
    std::vector<int> missing;
    for (int rank = 1; rank < options_.world_size; ++rank)
      if (!ranks_[static_cast<size_t>(rank)]) missing.push_back(rank);
    std::string problem = fmt::format(
        "{} {} did not connect to rank 0 on port {} within {} s ({} of {} arrived); check that they started "
        "and "
        "that MASTER_ADDR={} reaches this machine",
        missing.size() == 1 ? "rank" : "ranks", absl::StrJoin(missing, ", "), options_.master_port,
        options_.timeout_seconds, admitted_ + 1, options_.world_size, options_.master_addr);
    if (refused_ > 0) {
      problem += fmt::format("; {} {} refused meanwhile, the last: {}", refused_,
                             refused_ == 1 ? "connection was" : "connections were", last_refusal_);
    }
    return problem;
  }

  // Ends the rendezvous: every admitted rank (and `also`) learns why.
  absl::StatusOr<std::vector<uint8_t>> fail(const std::string& problem, Connection* also) {
    const std::string message = "rendezvous: " + problem;
    const RendezvousReply refusal{.accepted = false, .data = text_bytes(message)};
    if (also != nullptr) tell(*also, refusal);
    for (std::optional<Connection>& rank : ranks_)
      if (rank) tell(*rank, refusal);
    return absl::UnavailableError(message);
  }

  void tell(Connection& connection, const RendezvousReply& reply) {
    const std::vector<uint8_t> bytes =
        encode_reply(options_.key, connection.challenge, connection.hello_nonce, reply);
    (void)send_all(connection.socket.fd(), bytes, std::min(deadline_, Clock::now() + kVerdictSending),
                   "the verdict");
  }

  void refused(Connection& connection, const std::string& why) {
    ++refused_;
    last_refusal_ = fmt::format("{}: {}", connection.address, why);
    note(fmt::format("refused a connection from {}", last_refusal_));
    connection.socket.reset();
  }

  void note(const std::string& text) const {
    if (options_.on_refused) {
      options_.on_refused(text);
    } else {
      std::fprintf(stderr, "nanoforge: rank 0: rendezvous: %s\n", text.c_str());
    }
  }

  static std::vector<uint8_t> text_bytes(const std::string& text) {
    const size_t bytes = std::min(text.size(), kRendezvousMaxDataBytes);
    return {text.begin(), text.begin() + static_cast<ptrdiff_t>(bytes)};
  }

  const RendezvousOptions& options_;
  const Clock::time_point deadline_;
  Socket listener_;
  std::vector<Connection> pending_;               // saying hello
  std::vector<std::optional<Connection>> ranks_;  // admitted, by rank
  int admitted_ = 0;
  int refused_ = 0;
  std::string last_refusal_;
  absl::Status problem_;  // set when the rendezvous must end
};

}  // namespace

absl::StatusOr<std::vector<uint8_t>> serve_rendezvous(const RendezvousOptions& options,
                                                      TcpClock::time_point deadline,
                                                      std::span<const uint8_t> payload) {
  NANOFORGE_ASSIGN_OR_RETURN(Socket listener, listen_on(options.master_port, "rank 0", "MASTER_PORT"));
  RendezvousServer server(options, deadline, std::move(listener));
  return server.run(payload);
}

}  // namespace nanoforge
