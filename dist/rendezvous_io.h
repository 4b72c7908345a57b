// The TCP rendezvous's sockets (private to dist/): a descriptor closed with its owner, and whole messages
// sent and received on a non-blocking socket against a deadline, a message's header checked before its body
// is read; the listener, and the connection that waits for the listener's challenge. Used by both sides: rank
// 0's server (rendezvous_server.cpp) and the joining ranks (tcp_rendezvous.cpp), and by the launch agents'
// rendezvous (agent_rendezvous.cpp).
#pragma once

#include <absl/status/statusor.h>

#include <netdb.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dist/rendezvous_protocol.h"
#include "dist/tcp_io.h"

namespace nanoforge::rendezvous_io {

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

std::string errno_text(int error);

// Waits until `fd` is ready for `events`; false at the deadline.
absl::StatusOr<bool> wait_ready(int fd, short events, TcpClock::time_point deadline);

absl::Status send_all(int fd, std::span<const uint8_t> bytes, TcpClock::time_point deadline,
                      const char* what);

// ABORTED when the peer closed the connection before all of `bytes` arrived.
absl::Status receive_all(int fd, std::span<uint8_t> bytes, TcpClock::time_point deadline,
                         const std::string& what);

// One message of type `expected`: its header, checked before a body of the length it announces is read.
absl::StatusOr<std::vector<uint8_t>> receive_message(int fd, RendezvousMessage expected,
                                                     TcpClock::time_point deadline, const std::string& what);

// A listening socket on `port`, every interface (IPv6 taking IPv4 too, or IPv4 alone); UNAVAILABLE naming
// `who` ("rank 0") when the port is in use or cannot be bound, and the setting to change (`port_name`).
absl::StatusOr<Socket> listen_on(int port, std::string_view who, std::string_view port_name);

// A connection to one of `addresses` that delivered the listener's challenge (named `challenge_name` in
// errors), within `hello_timeout_seconds` of connecting; ABORTED (with `*last_error` set) when nothing
// listens yet or the listener closed the connection first, which is worth another try.
absl::StatusOr<std::pair<Socket, RendezvousNonce>> connect_and_get_challenge(
    const addrinfo* addresses, double hello_timeout_seconds, TcpClock::time_point deadline,
    std::string* last_error, const std::string& challenge_name, std::string_view port_name);

}  // namespace nanoforge::rendezvous_io
