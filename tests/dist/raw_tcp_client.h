// A raw TCP client of 127.0.0.1:port for the hostile tests of rank 0's rendezvous and heartbeat ports: it
// speaks whatever bytes a test gives it, and every read and write gives up after the test's hang guard, so a
// server that never answers fails the test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace nanoforge::test {

class RawTcpClient {
 public:
  // Connects, retrying while rank 0 is not listening yet, for at most `hang_guard_seconds`.
  RawTcpClient(int port, int hang_guard_seconds) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(hang_guard_seconds);
    while (true) {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const timeval limit{hang_guard_seconds, 0};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      address.sin_port = htons(static_cast<uint16_t>(port));
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) break;
      ::close(fd_);
      fd_ = -1;
      if (std::chrono::steady_clock::now() > give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_GE(fd_, 0) << "could not connect to port " << port;
  }
  ~RawTcpClient() { close(); }
  RawTcpClient(const RawTcpClient&) = delete;
  RawTcpClient& operator=(const RawTcpClient&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::vector<uint8_t>& bytes) {
    EXPECT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // Exactly `count` bytes, or fewer when the other side closed.
  std::vector<uint8_t> receive(size_t count) {
    std::vector<uint8_t> bytes(count);
    size_t got = 0;
    while (got < count) {
      const ssize_t n = ::recv(fd_, bytes.data() + got, count - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);
    return bytes;
  }

 protected:
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace nanoforge::test
