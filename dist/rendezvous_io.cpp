// Deadline-bound socket I/O of the TCP rendezvous (rendezvous_io.h).
#include "dist/rendezvous_io.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

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

}  // namespace nanoforge::rendezvous_io
