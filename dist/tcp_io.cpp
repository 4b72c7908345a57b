// Deadlines and peer names for the TCP channels (tcp_io.h).
#include "dist/tcp_io.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>

namespace nanoforge {

TcpClock::time_point tcp_deadline_after(double seconds) {
  return TcpClock::now() +
         std::chrono::duration_cast<TcpClock::duration>(std::chrono::duration<double>(seconds));
}

int tcp_remaining_ms(TcpClock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - TcpClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

void tcp_set_no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string tcp_peer_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "an unknown address";
  char host[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* ipv4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &ipv4->sin_addr, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(ipv4->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* ipv6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (IN6_IS_ADDR_V4MAPPED(&ipv6->sin6_addr)) {  // an IPv4 peer of the dual-stack listener
      ::inet_ntop(AF_INET, &ipv6->sin6_addr.s6_addr[12], host, sizeof(host));
      return fmt::format("{}:{}", host, ntohs(ipv6->sin6_port));
    }
    ::inet_ntop(AF_INET6, &ipv6->sin6_addr, host, sizeof(host));
    return fmt::format("[{}]:{}", host, ntohs(ipv6->sin6_port));
  }
  return "an unknown address";
}

}  // namespace nanoforge
