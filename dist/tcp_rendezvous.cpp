// tcp_rendezvous: non-blocking sockets driven by poll() against deadlines. Rank 0 serves every connection at
// once, so a slow or hostile client holds up no one: each connection gets a challenge and has
// hello_timeout_seconds to answer it, at most kMaxPendingConnections wait at a time, and ranks that
// authenticated are watched for hang-ups (which free their slot) until all have come.
#include "dist/tcp_rendezvous.h"

#include <absl/strings/str_join.h>
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "dist/tcp_io.h"
#include "support/json_text.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using Clock = TcpClock;

constexpr auto kConnectRetry = std::chrono::milliseconds(100);  // while rank 0 is not listening yet
constexpr auto kConnectAttempt = std::chrono::seconds(5);       // one connect() to one address
constexpr auto kVerdictSending = std::chrono::seconds(1);       // best effort: a refused peer learns why
// Connections waiting to authenticate at once; more are closed at once, so that a flood of connections
// cannot exhaust rank 0's file descriptors (the rank they keep out retries).
constexpr size_t kMaxPendingConnections = 64;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Socket() { reset(); }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int error) {
  return std::strerror(error);
}

// Waits until `fd` is ready for `events`; false at the deadline.
absl::StatusOr<bool> wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, tcp_remaining_ms(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return absl::UnavailableError(fmt::format("poll: {}", errno_text(errno)));
  }
}

absl::Status send_all(int fd, std::span<const uint8_t> bytes, Clock::time_point deadline, const char* what) {
  while (!bytes.empty()) {
    NANOFORGE_ASSIGN_OR_RETURN(const bool ready, wait_ready(fd, POLLOUT, deadline));
    if (!ready) return absl::DeadlineExceededError(fmt::format("timed out sending {}", what));
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(fmt::format("sending {}: {}", what, errno_text(errno)));
    }
    bytes = bytes.subspan(static_cast<size_t>(sent));
  }
  return absl::OkStatus();
}

// ABORTED when the peer closed the connection before all of `bytes` arrived.
absl::Status receive_all(int fd, std::span<uint8_t> bytes, Clock::time_point deadline,
                         const std::string& what) {
  const size_t total = bytes.size();
  while (!bytes.empty()) {
    NANOFORGE_ASSIGN_OR_RETURN(const bool ready, wait_ready(fd, POLLIN, deadline));
    if (!ready) {
      return absl::DeadlineExceededError(fmt::format("timed out waiting for {} ({} of {} bytes arrived)",
                                                     what, total - bytes.size(), total));
    }
    const ssize_t got = ::recv(fd, bytes.data(), bytes.size(), 0);
    if (got == 0) return absl::AbortedError(fmt::format("the connection closed before {} arrived", what));
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET)
        return absl::AbortedError(fmt::format("the connection was reset before {} arrived", what));
      return absl::UnavailableError(fmt::format("receiving {}: {}", what, errno_text(errno)));
    }
    bytes = bytes.subspan(static_cast<size_t>(got));
  }
  return absl::OkStatus();
}

// One message of type `expected`: its header, checked before a body of the length it announces is read.
absl::StatusOr<std::vector<uint8_t>> receive_message(int fd, RendezvousMessage expected,
                                                     Clock::time_point deadline, const std::string& what) {
  std::array<uint8_t, kRendezvousHeaderBytes> header;
  NANOFORGE_RETURN_IF_ERROR(receive_all(fd, header, deadline, what));
  absl::StatusOr<size_t> length = parse_rendezvous_header(header, expected);
  if (!length.ok())
    return absl::DataLossError(fmt::format("{}: {}", what, std::string(length.status().message())));
  std::vector<uint8_t> body(*length);
  NANOFORGE_RETURN_IF_ERROR(receive_all(fd, body, deadline, what));
  return body;
}

absl::StatusOr<Socket> listen_on(int port) {
  // IPv6 with IPV6_V6ONLY off takes IPv4 connections too; fall back to IPv4 where IPv6 is disabled.
  for (const int family : {AF_INET6, AF_INET}) {
    Socket socket(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!socket.valid()) continue;
    const int one = 1;
    const int zero = 0;
    ::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int bound = -1;
    if (family == AF_INET6) {
      ::setsockopt(socket.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      sockaddr_in6 address{};
      address.sin6_family = AF_INET6;
      address.sin6_addr = in6addr_any;
      address.sin6_port = htons(static_cast<uint16_t>(port));
      bound = ::bind(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address));
    } else {
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_ANY);
      address.sin_port = htons(static_cast<uint16_t>(port));
      bound = ::bind(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address));
    }
    if (bound != 0) {
      if (errno == EADDRINUSE) {
        return absl::UnavailableError(fmt::format(
            "rank 0 cannot listen on port {}: it is in use (another job? pick another MASTER_PORT)", port));
      }
      if (family == AF_INET6) continue;
      return absl::UnavailableError(
          fmt::format("rank 0 cannot listen on port {}: {}", port, errno_text(errno)));
    }
    if (::listen(socket.fd(), SOMAXCONN) != 0)
      return absl::UnavailableError(
          fmt::format("rank 0 cannot listen on port {}: {}", port, errno_text(errno)));
    return socket;
  }
  return absl::UnavailableError("rank 0 cannot create a TCP socket");
}

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
    const int one = 1;
    ::setsockopt(connection.socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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

// One connection to rank 0 that delivered its challenge, or an error; ABORTED when rank 0 (or whatever
// listens there) closed the connection first, which is worth another try.
absl::StatusOr<std::pair<Socket, RendezvousNonce>> connect_and_get_challenge(const addrinfo* addresses,
                                                                             const RendezvousOptions& options,
                                                                             Clock::time_point deadline,
                                                                             std::string* last_error) {
  for (const addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    Socket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!socket.valid()) continue;
    if (::connect(socket.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *last_error = errno_text(errno);
        continue;
      }
      NANOFORGE_ASSIGN_OR_RETURN(
          const bool ready,
          wait_ready(socket.fd(), POLLOUT, std::min(deadline, Clock::now() + kConnectAttempt)));
      int error = ETIMEDOUT;
      socklen_t length = sizeof(error);
      if (ready) ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        *last_error = errno_text(error);
        continue;
      }
    }
    const int one = 1;
    ::setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const auto challenge_deadline = std::min(deadline, tcp_deadline_after(options.hello_timeout_seconds));
    absl::StatusOr<std::vector<uint8_t>> body =
        receive_message(socket.fd(), RendezvousMessage::kChallenge, challenge_deadline, "rank 0's challenge");
    if (!body.ok()) {
      if (absl::IsAborted(body.status())) {
        *last_error = std::string(body.status().message());
        continue;
      }
      return absl::Status(body.status().code(),
                          fmt::format("{} (is another program listening on MASTER_PORT?)",
                                      std::string(body.status().message())));
    }
    NANOFORGE_ASSIGN_OR_RETURN(const RendezvousChallenge challenge, parse_challenge_body(*body));
    return std::pair<Socket, RendezvousNonce>(std::move(socket), challenge.nonce);
  }
  return absl::AbortedError(*last_error);
}

absl::StatusOr<std::vector<uint8_t>> join(const RendezvousOptions& options, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(options.master_port);
  const std::string where = fmt::format("rank 0 at {}:{}", options.master_addr, options.master_port);
  // Name resolution can fail for a while when nodes boot together: retry it like the connection.
  int resolved = EAI_AGAIN;
  while ((resolved = ::getaddrinfo(options.master_addr.c_str(), port.c_str(), &hints, &addresses)) ==
             EAI_AGAIN &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(kConnectRetry);
  }
  if (resolved != 0) {
    return absl::InvalidArgumentError(fmt::format("rendezvous: MASTER_ADDR={} does not resolve: {}",
                                                  json_string(options.master_addr),
                                                  ::gai_strerror(resolved)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(addresses, &::freeaddrinfo);
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(), fmt::format("rendezvous: rank {} with {}: {}", options.rank, where,
                                                   std::string(status.message())));
  };
  std::string last_error = "none";
  std::optional<std::pair<Socket, RendezvousNonce>> connected;
  while (!connected) {
    absl::StatusOr<std::pair<Socket, RendezvousNonce>> attempt =
        connect_and_get_challenge(addresses, options, deadline, &last_error);
    if (attempt.ok()) {
      connected = std::move(*attempt);
      break;
    }
    if (!absl::IsAborted(attempt.status())) return failed(attempt.status());
    if (Clock::now() + kConnectRetry >= deadline) {
      return absl::DeadlineExceededError(fmt::format(
          "rendezvous: rank {} could not connect to {} within {} s (last error: {}); is rank 0 running, and "
          "is MASTER_ADDR an address of its machine that this one can reach?",
          options.rank, where, options.timeout_seconds, last_error));
    }
    std::this_thread::sleep_for(kConnectRetry);
  }
  auto& [socket, challenge] = *connected;
  NANOFORGE_ASSIGN_OR_RETURN(const RendezvousNonce nonce, random_rendezvous_nonce());
  const std::vector<uint8_t> hello =
      encode_hello(options.key, challenge, static_cast<uint32_t>(options.world_size),
                   static_cast<uint32_t>(options.rank), nonce);
  if (absl::Status sent = send_all(socket.fd(), hello, deadline, "the hello"); !sent.ok())
    return failed(sent);
  absl::StatusOr<std::vector<uint8_t>> body =
      receive_message(socket.fd(), RendezvousMessage::kReply, deadline, "rank 0's reply");
  if (!body.ok()) {
    if (absl::IsDataLoss(body.status())) return failed(body.status());
    return failed(absl::Status(body.status().code(),
                               std::string(body.status().message()) +
                                   " (rank 0 waits for every rank before it answers: see its error)"));
  }
  absl::StatusOr<RendezvousReply> reply = parse_reply_body(*body, options.key, challenge, nonce);
  if (!reply.ok()) return failed(reply.status());
  if (!reply->accepted) {
    return failed(absl::FailedPreconditionError(
        fmt::format("rank 0 refused: {}", std::string(reply->data.begin(), reply->data.end()))));
  }
  return std::move(reply->data);
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> tcp_rendezvous(const RendezvousOptions& options,
                                                    std::span<const uint8_t> payload) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        fmt::format("rendezvous: rank {} is not in a world of {}", options.rank, options.world_size));
  }
  if (options.world_size == 1) return std::vector<uint8_t>(payload.begin(), payload.end());
  if (options.key.source.empty())
    return absl::InvalidArgumentError(
        "rendezvous: no key given (rendezvous_key_from_env makes the job's key)");
  if (payload.size() > kRendezvousMaxDataBytes) {
    return absl::InvalidArgumentError(fmt::format("rendezvous payload of {} bytes is too big (at most {})",
                                                  payload.size(), kRendezvousMaxDataBytes));
  }
  const auto deadline = tcp_deadline_after(options.timeout_seconds);
  if (options.rank != 0) return join(options, deadline);
  NANOFORGE_ASSIGN_OR_RETURN(Socket listener, listen_on(options.master_port));
  RendezvousServer server(options, deadline, std::move(listener));
  return server.run(payload);
}

}  // namespace nanoforge
