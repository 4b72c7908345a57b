// Loopback sockets for the emulated NCCL (nccl_sockets.h). Writes use MSG_NOSIGNAL, so a peer that died
// is an error to report, not a SIGPIPE.
#include "emulator/nccl_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace nanoforge::emulator {
namespace {

constexpr int kPollSliceMs = 50;

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

bool wait_ready(int fd, short events, const std::atomic<bool>& stop) {
  while (!stop.load()) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, kPollSliceMs);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // the read or write reports the error
  }
  return false;
}

}  // namespace

int listen_on_loopback(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address = loopback(0);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

int connect_to_loopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const sockaddr_in address = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

int accept_until(int listener, const std::atomic<bool>& stop) {
  if (!wait_ready(listener, POLLIN, stop)) return -1;
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

Transfer write_exact(int fd, const void* data, size_t bytes, const std::atomic<bool>& stop) {
  size_t done = 0;
  while (done < bytes) {
    if (!wait_ready(fd, POLLOUT, stop)) return Transfer::kStopped;
    if (!write_some(fd, static_cast<const unsigned char*>(data), bytes, &done)) return Transfer::kClosed;
  }
  return Transfer::kDone;
}

Transfer read_exact(int fd, void* data, size_t bytes, const std::atomic<bool>& stop) {
  size_t done = 0;
  while (done < bytes) {
    if (!wait_ready(fd, POLLIN, stop)) return Transfer::kStopped;
    if (!read_some(fd, static_cast<unsigned char*>(data), bytes, &done)) return Transfer::kClosed;
  }
  return Transfer::kDone;
}

bool write_some(int fd, const unsigned char* data, size_t bytes, size_t* done) {
  while (*done < bytes) {
    const ssize_t n = ::send(fd, data + *done, bytes - *done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    return false;
  }
  return true;
}

bool read_some(int fd, unsigned char* data, size_t bytes, size_t* done) {
  while (*done < bytes) {
    const ssize_t n = ::recv(fd, data + *done, bytes - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    return false;  // 0: the peer closed; < 0: reset
  }
  return true;
}

}  // namespace nanoforge::emulator
