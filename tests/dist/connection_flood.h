// A flood of connections that never authenticate, for the tests of rank 0's heartbeat port: idle ones, and
// ones that send 64 bytes of garbage, to 127.0.0.1:port. Connections the server closes are replaced by new
// ones, at most 20 every 10 ms (2,000 a second, against a server that may hold 16 unauthenticated ones for 5
// s each), so the pressure stays for as long as the flood is kept up without the flood itself taking a core
// of the 2-core machines the tests run on.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace nanoforge::test {

class ConnectionFlood {
 public:
  ConnectionFlood(int port, int idle, int garbage) : port_(port) {
    for (int i = 0; i < idle + garbage; ++i)
      connections_.push_back({open_one(), i >= idle, false});
  }
  ~ConnectionFlood() {
    for (const Connection& connection : connections_)
      if (connection.fd >= 0) ::close(connection.fd);
  }
  ConnectionFlood(const ConnectionFlood&) = delete;
  ConnectionFlood& operator=(const ConnectionFlood&) = delete;

  // Keeps the flood up in rounds of 10 ms while `go_on()` says so.
  void sustain(const std::function<bool()>& go_on) {
    constexpr auto kRound = std::chrono::milliseconds(10);
    constexpr int kMostReplacedPerRound = 20;
    std::vector<pollfd> fds;
    while (go_on()) {
      const auto next_round = std::chrono::steady_clock::now() + kRound;
      int replaced_this_round = 0;
      fds.clear();
      for (const Connection& connection : connections_)
        fds.push_back({connection.fd, static_cast<short>(POLLRDHUP | (connection.sent ? 0 : POLLOUT)), 0});
      ::poll(fds.data(), fds.size(), static_cast<int>(kRound.count()));
      // From where the last round stopped replacing, so that every connection gets its turn.
      const size_t first = next_to_replace_;
      for (size_t k = 0; k < connections_.size(); ++k) {
        const size_t i = (first + k) % connections_.size();
        Connection& connection = connections_[i];
        if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
          if (replaced_this_round == kMostReplacedPerRound) continue;
          if (++replaced_this_round == kMostReplacedPerRound) next_to_replace_ = i + 1;
          ::close(connection.fd);
          connection.fd = open_one();
          connection.sent = false;
          ++replaced_;
        } else if ((fds[i].revents & POLLOUT) && !connection.sent) {
          if (connection.garbage) {
            const std::string junk(64, 'G');
            (void)!::send(connection.fd, junk.data(), junk.size(), MSG_NOSIGNAL);
          }
          connection.sent = true;
        }
      }
      std::this_thread::sleep_until(next_round);
    }
  }
  // How many connections the server closed (each replaced by a new one).
  int64_t replaced() const { return replaced_; }

  // This process needs a descriptor per connection: raises its soft limit towards `wanted`.
  static void allow_descriptors(rlim_t wanted) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_cur < wanted) {
      limit.rlim_cur = std::min(wanted, limit.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
  }

 private:
  struct Connection {
    int fd;
    bool garbage;
    bool sent;
  };
  int open_one() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port_));
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));  // EINPROGRESS: polled above
    return fd;
  }

  const int port_;
  std::vector<Connection> connections_;
  size_t next_to_replace_ = 0;
  int64_t replaced_ = 0;
};

// How many descriptors process `pid` holds (what a flood would exhaust); 0 once it is gone.
inline int open_descriptors(pid_t pid) {
  int count = 0;
  std::error_code error;
  for (auto entry = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error);
       !error && entry != std::filesystem::directory_iterator(); entry.increment(error))
    ++count;
  return count;
}

}  // namespace nanoforge::test
