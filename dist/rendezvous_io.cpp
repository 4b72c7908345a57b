// Deadline-bound socket I/O of the TCP rendezvous (rendezvous_io.h).
#include "dist/rendezvous_io.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "support/status.h"

namespace nanoforge::rendezvous_io {

using Clock = TcpClock;

std::string errno_text(int error) {
  return std::strerror(error);
}

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

constexpr auto kConnectAttempt = std::chrono::seconds(5);  // one connect() to one address

absl::StatusOr<Socket> listen_on(int port, std::string_view who, std::string_view port_name) {
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
        return absl::UnavailableError(
            fmt::format("{} cannot listen on port {}: it is in use (another job? pick another {})", who, port,
                        port_name));
      }
      if (family == AF_INET6) continue;
      return absl::UnavailableError(
          fmt::format("{} cannot listen on port {}: {}", who, port, errno_text(errno)));
    }
    if (::listen(socket.fd(), SOMAXCONN) != 0)
      return absl::UnavailableError(
          fmt::format("{} cannot listen on port {}: {}", who, port, errno_text(errno)));
    return socket;
  }
  return absl::UnavailableError(fmt::format("{} cannot create a TCP socket", who));
}

// One connection to rank 0 that delivered its challenge, or an error; ABORTED when rank 0 (or whatever
// listens there) closed the connection first, which is worth another try.
absl::StatusOr<std::pair<Socket, RendezvousNonce>> connect_and_get_challenge(
    const addrinfo* addresses, double hello_timeout_seconds, Clock::time_point deadline,
    std::string* last_error, const std::string& challenge_name, std::string_view port_name) {
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
    tcp_set_no_delay(socket.fd());
    const auto challenge_deadline = std::min(deadline, tcp_deadline_after(hello_timeout_seconds));
    absl::StatusOr<std::vector<uint8_t>> body =
        receive_message(socket.fd(), RendezvousMessage::kChallenge, challenge_deadline, challenge_name);
    if (!body.ok()) {
      if (absl::IsAborted(body.status())) {
        *last_error = std::string(body.status().message());
        continue;
      }
      return absl::Status(body.status().code(), fmt::format("{} (is another program listening on {}?)",
                                                            std::string(body.status().message()), port_name));
    }
    NANOFORGE_ASSIGN_OR_RETURN(const RendezvousChallenge challenge, parse_challenge_body(*body));
    return std::pair<Socket, RendezvousNonce>(std::move(socket), challenge.nonce);
  }
  return absl::AbortedError(*last_error);
}

}  // namespace nanoforge::rendezvous_io
