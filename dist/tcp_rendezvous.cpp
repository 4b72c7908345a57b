// tcp_rendezvous: blocking sockets driven by poll() against one deadline. Messages are a few big-endian
// 32-bit words: hello = {magic, version, world_size, rank}; reply = {magic, status, length} then `length`
// bytes (the payload, or rank 0's reason for refusing the peer).
#include "dist/tcp_rendezvous.h"

#include <absl/strings/str_join.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "support/status.h"

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x4E46525A;  // "NFRZ"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kAccepted = 0;
constexpr uint32_t kRefused = 1;
constexpr uint32_t kMaxPayloadBytes = 1 << 16;
constexpr auto kConnectRetry = std::chrono::milliseconds(100);  // while rank 0 is not listening yet

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

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits until `fd` is ready for `events`; false at the deadline.
absl::StatusOr<bool> wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, remaining_ms(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return absl::UnavailableError(fmt::format("poll: {}", errno_text(errno)));
  }
}

absl::Status send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline, const char* what) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    NANOFORGE_ASSIGN_OR_RETURN(const bool ready, wait_ready(fd, POLLOUT, deadline));
    if (!ready) return absl::DeadlineExceededError(fmt::format("timed out sending {}", what));
    const ssize_t sent = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(fmt::format("sending {}: {}", what, errno_text(errno)));
    }
    p += sent;
    bytes -= static_cast<size_t>(sent);
  }
  return absl::OkStatus();
}

absl::Status receive_all(int fd, void* data, size_t bytes, Clock::time_point deadline, const char* what) {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    NANOFORGE_ASSIGN_OR_RETURN(const bool ready, wait_ready(fd, POLLIN, deadline));
    if (!ready) return absl::DeadlineExceededError(fmt::format("timed out waiting for {}", what));
    const ssize_t got = ::recv(fd, p, bytes, 0);
    if (got == 0) return absl::UnavailableError(fmt::format("the connection closed before {} arrived", what));
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(fmt::format("receiving {}: {}", what, errno_text(errno)));
    }
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

template <size_t N>
absl::Status send_words(int fd, const std::array<uint32_t, N>& words, Clock::time_point deadline,
                        const char* what) {
  std::array<uint32_t, N> wire;
  for (size_t i = 0; i < N; ++i)
    wire[i] = htonl(words[i]);
  return send_all(fd, wire.data(), sizeof(wire), deadline, what);
}

template <size_t N>
absl::StatusOr<std::array<uint32_t, N>> receive_words(int fd, Clock::time_point deadline, const char* what) {
  std::array<uint32_t, N> words;
  NANOFORGE_RETURN_IF_ERROR(receive_all(fd, words.data(), sizeof(words), deadline, what));
  for (uint32_t& word : words)
    word = ntohl(word);
  return words;
}

absl::Status send_reply(int fd, uint32_t status, std::span<const uint8_t> body, Clock::time_point deadline) {
  NANOFORGE_RETURN_IF_ERROR(send_words<3>(fd, {kMagic, status, static_cast<uint32_t>(body.size())}, deadline,
                                          "the rendezvous reply"));
  return send_all(fd, body.data(), body.size(), deadline, "the rendezvous payload");
}

void refuse(int fd, const std::string& reason, Clock::time_point deadline) {
  // Best effort, briefly: the peer learns why instead of seeing a closed connection.
  const auto soon = std::min(deadline, Clock::now() + std::chrono::seconds(1));
  (void)send_reply(fd, kRefused, {reinterpret_cast<const uint8_t*>(reason.data()), reason.size()}, soon);
}

absl::StatusOr<Socket> listen_on(int port) {
  // IPv6 with IPV6_V6ONLY off takes IPv4 connections too; fall back to IPv4 where IPv6 is disabled.
  for (const int family : {AF_INET6, AF_INET}) {
    Socket socket(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
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

absl::StatusOr<std::vector<uint8_t>> serve(const RendezvousOptions& options, std::span<const uint8_t> payload,
                                           Clock::time_point deadline) {
  if (payload.size() > kMaxPayloadBytes)
    return absl::InvalidArgumentError(
        fmt::format("rendezvous payload of {} bytes is too big", payload.size()));
  NANOFORGE_ASSIGN_OR_RETURN(Socket listener, listen_on(options.master_port));
  std::vector<Socket> peers(static_cast<size_t>(options.world_size));
  int connected = 0;
  auto fail = [&](const std::string& message) {
    for (Socket& peer : peers)
      if (peer.valid()) refuse(peer.fd(), message, deadline);
    return absl::UnavailableError(message);
  };
  while (connected < options.world_size - 1) {
    NANOFORGE_ASSIGN_OR_RETURN(const bool ready, wait_ready(listener.fd(), POLLIN, deadline));
    if (!ready) {
      std::vector<int> missing;
      for (int rank = 1; rank < options.world_size; ++rank)
        if (!peers[static_cast<size_t>(rank)].valid()) missing.push_back(rank);
      return fail(fmt::format(
          "rendezvous: {} {} did not connect to rank 0 on port {} within {} s ({} of {} arrived); check that "
          "they started and that MASTER_ADDR={} reaches this machine",
          missing.size() == 1 ? "rank" : "ranks", absl::StrJoin(missing, ", "), options.master_port,
          options.timeout_seconds, connected + 1, options.world_size, options.master_addr));
    }
    Socket peer(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!peer.valid()) continue;  // the peer gave up meanwhile
    // A peer has a few seconds to introduce itself, so a stray connection cannot hold the rendezvous.
    const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    absl::StatusOr<std::array<uint32_t, 4>> hello = receive_words<4>(peer.fd(), hello_deadline, "a hello");
    if (!hello.ok() || (*hello)[0] != kMagic) continue;  // not one of ours (a port scanner, a health check)
    const auto [magic, version, world_size, rank] = *hello;
    std::string problem;
    if (version != kVersion) {
      problem =
          fmt::format("rank {} speaks rendezvous version {}, rank 0 speaks {} (mixed nanoforge builds?)",
                      rank, version, kVersion);
    } else if (static_cast<int>(world_size) != options.world_size) {
      problem = fmt::format("rank {} was started with WORLD_SIZE={} but rank 0 with WORLD_SIZE={}", rank,
                            world_size, options.world_size);
    } else if (rank == 0 || static_cast<int>(rank) >= options.world_size) {
      problem = fmt::format("a peer says it is rank {}, which is not a rank in 1..{}", rank,
                            options.world_size - 1);
    } else if (peers[rank].valid()) {
      problem = fmt::format("two processes say they are rank {} (check RANK in the launch script)", rank);
    }
    if (!problem.empty()) {
      refuse(peer.fd(), problem, deadline);
      return fail("rendezvous: " + problem);
    }
    peers[rank] = std::move(peer);
    ++connected;
  }
  for (int rank = 1; rank < options.world_size; ++rank) {
    if (absl::Status sent = send_reply(peers[rank].fd(), kAccepted, payload, deadline); !sent.ok())
      return absl::UnavailableError(
          fmt::format("rendezvous: sending to rank {}: {}", rank, std::string(sent.message())));
  }
  return std::vector<uint8_t>(payload.begin(), payload.end());
}

// One connection attempt to any address of rank 0, bounded by `deadline`.
absl::StatusOr<Socket> connect_once(const addrinfo* addresses, Clock::time_point deadline, int* last_error) {
  for (const addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    Socket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!socket.valid()) continue;
    if (::connect(socket.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *last_error = errno;
        continue;
      }
      NANOFORGE_ASSIGN_OR_RETURN(
          const bool ready,
          wait_ready(socket.fd(), POLLOUT, std::min(deadline, Clock::now() + std::chrono::seconds(5))));
      int error = ETIMEDOUT;
      socklen_t length = sizeof(error);
      if (ready) ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        *last_error = error;
        continue;
      }
    }
    const int one = 1;
    ::setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return socket;
  }
  return Socket();
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
    return absl::InvalidArgumentError(fmt::format("rendezvous: MASTER_ADDR={:?} does not resolve: {}",
                                                  options.master_addr, ::gai_strerror(resolved)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(addresses, &::freeaddrinfo);
  int last_error = 0;
  Socket socket;
  while (!socket.valid()) {
    NANOFORGE_ASSIGN_OR_RETURN(socket, connect_once(addresses, deadline, &last_error));
    if (socket.valid()) break;
    if (Clock::now() + kConnectRetry >= deadline) {
      return absl::DeadlineExceededError(fmt::format(
          "rendezvous: rank {} could not connect to {} within {} s (last error: {}); is rank 0 running, and "
          "is MASTER_ADDR an address of its machine that this one can reach?",
          options.rank, where, options.timeout_seconds, last_error ? errno_text(last_error) : "none"));
    }
    std::this_thread::sleep_for(kConnectRetry);
  }
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(), fmt::format("rendezvous: rank {} with {}: {}", options.rank, where,
                                                   std::string(status.message())));
  };
  if (absl::Status sent = send_words<4>(
          socket.fd(),
          {kMagic, kVersion, static_cast<uint32_t>(options.world_size), static_cast<uint32_t>(options.rank)},
          deadline, "the hello");
      !sent.ok()) {
    return failed(sent);
  }
  absl::StatusOr<std::array<uint32_t, 3>> reply = receive_words<3>(socket.fd(), deadline, "rank 0's reply");
  if (!reply.ok()) {
    return failed(absl::Status(reply.status().code(),
                               std::string(reply.status().message()) +
                                   " (rank 0 waits for every rank before it answers: see its error)"));
  }
  const auto [magic, status, length] = *reply;
  if (magic != kMagic || length > kMaxPayloadBytes)
    return failed(absl::DataLossError("the reply is not a nanoforge rendezvous reply"));
  std::vector<uint8_t> body(length);
  if (absl::Status got = receive_all(socket.fd(), body.data(), body.size(), deadline, "the payload");
      !got.ok())
    return failed(got);
  if (status != kAccepted) {
    return failed(absl::FailedPreconditionError(
        fmt::format("rank 0 refused: {}", std::string(body.begin(), body.end()))));
  }
  return body;
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> tcp_rendezvous(const RendezvousOptions& options,
                                                    std::span<const uint8_t> payload) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        fmt::format("rendezvous: rank {} is not in a world of {}", options.rank, options.world_size));
  }
  if (options.world_size == 1) return std::vector<uint8_t>(payload.begin(), payload.end());
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options.timeout_seconds));
  if (options.rank == 0) return serve(options, payload, deadline);
  return join(options, deadline);
}

}  // namespace nanoforge
