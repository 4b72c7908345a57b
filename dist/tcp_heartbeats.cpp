// TcpHeartbeats (tcp_heartbeats.h). Messages: a peer's hello (rank, 4 bytes; token, 16), then its
// announcements (1 + sequence, 8 bytes each); rank 0's table (per rank: 1 + latest sequence, 8 bytes;
// milliseconds since heard, 4; flags, 4: heard, disconnected).
#include "dist/tcp_heartbeats.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace nanoforge {
namespace {

constexpr size_t kHelloBytes = 4 + 16;
constexpr size_t kAnnounceBytes = 8;
constexpr size_t kEntryBytes = 16;
constexpr uint32_t kHeard = 1, kDisconnected = 2;
// At most this much waits to be written to one connection; beyond it tables are dropped (a peer not reading).
constexpr size_t kMaxQueuedBytes = 64 << 10;

void make_non_blocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Writes what the socket takes; false when the connection is broken.
bool flush(int fd, std::string& out) {
  while (!out.empty()) {
    const ssize_t n = ::send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out.erase(0, static_cast<size_t>(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return true;
}

// Reads what has arrived; false when the peer closed or the connection broke.
bool fill(int fd, std::string& in) {
  char buffer[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      in.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

template <class T>
T read_at(const std::string& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

template <class T>
void append(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

TcpHeartbeats::TcpHeartbeats(int rank, int world_size)
    : rank_(rank), world_size_(world_size), peers_(static_cast<size_t>(world_size)) {
  for (Peer& peer : peers_)
    peer.heard_at = Clock::now();
}

TcpHeartbeats::~TcpHeartbeats() {
  for (Connection& c : unidentified_)
    ::close(c.fd);
  for (Peer& peer : peers_)
    if (peer.connection.fd >= 0) ::close(peer.connection.fd);
  if (to_root_.fd >= 0) ::close(to_root_.fd);
  if (listener_ >= 0) ::close(listener_);
}

absl::StatusOr<std::unique_ptr<TcpHeartbeats>> TcpHeartbeats::listen(int world_size,
                                                                     TcpHeartbeatAddress* address) {
  std::unique_ptr<TcpHeartbeats> channel(new TcpHeartbeats(0, world_size));
  channel->listener_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  socklen_t length = sizeof(any);
  const int no = 0;
  if (channel->listener_ < 0 ||
      ::setsockopt(channel->listener_, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no)) != 0 ||
      ::bind(channel->listener_, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 ||
      ::listen(channel->listener_, 128) != 0 ||
      ::getsockname(channel->listener_, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    return absl::UnavailableError(
        fmt::format("rank 0: cannot listen for heartbeats: {}", std::strerror(errno)));
  }
  if (RAND_bytes(channel->token_.data(), static_cast<int>(channel->token_.size())) != 1)
    return absl::UnavailableError("rank 0: no random bytes for the heartbeat token (RAND_bytes failed)");
  address->port = ntohs(any.sin6_port);
  address->token = channel->token_;
  return channel;
}

absl::StatusOr<std::unique_ptr<TcpHeartbeats>> TcpHeartbeats::connect(const std::string& master_addr,
                                                                      const TcpHeartbeatAddress& address,
                                                                      int rank, int world_size,
                                                                      double timeout_seconds) {
  std::unique_ptr<TcpHeartbeats> channel(new TcpHeartbeats(rank, world_size));
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  std::string failure = "no address";
  while (channel->to_root_.fd < 0) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(address.port);
    if (const int error = ::getaddrinfo(master_addr.c_str(), port.c_str(), &hints, &found); error != 0) {
      failure = ::gai_strerror(error);
    } else {
      for (addrinfo* a = found; a != nullptr && channel->to_root_.fd < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          channel->to_root_.fd = fd;
        } else {
          failure = std::strerror(errno);
          if (fd >= 0) ::close(fd);
        }
      }
      ::freeaddrinfo(found);
    }
    if (channel->to_root_.fd >= 0) break;
    if (Clock::now() > deadline) {
      return absl::UnavailableError(
          fmt::format("rank {}: cannot reach rank 0's heartbeat channel at {}:{}: {}", rank, master_addr,
                      address.port, failure));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  make_non_blocking(channel->to_root_.fd);
  append(channel->to_root_.out, static_cast<uint32_t>(rank));
  channel->to_root_.out.append(reinterpret_cast<const char*>(address.token.data()), address.token.size());
  flush(channel->to_root_.fd, channel->to_root_.out);
  return channel;
}

void TcpHeartbeats::announce(uint64_t sequence) {
  if (rank_ == 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    peers_[0].latest = sequence + 1;
    peers_[0].heard_at = Clock::now();
    return;
  }
  if (to_root_.fd < 0 || to_root_.out.size() > kMaxQueuedBytes) return;
  append(to_root_.out, sequence + 1);
  flush(to_root_.fd, to_root_.out);
}

int TcpHeartbeats::poll(uint64_t sequence) {
  if (rank_ != 0) return take_tables(sequence);
  accept_new();
  const int arrived = take_announcements(sequence);
  send_tables();
  return arrived;
}

void TcpHeartbeats::accept_new() {
  while (true) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    make_non_blocking(fd);
    unidentified_.push_back({fd, {}, {}});
  }
  for (size_t i = 0; i < unidentified_.size();) {
    Connection& c = unidentified_[i];
    const bool open = fill(c.fd, c.in);
    if (c.in.size() >= kHelloBytes) {
      const auto rank = read_at<uint32_t>(c.in, 0);
      const bool genuine = CRYPTO_memcmp(c.in.data() + 4, token_.data(), token_.size()) == 0;
      if (genuine && rank > 0 && rank < static_cast<uint32_t>(world_size_)) {
        std::lock_guard<std::mutex> lock(mutex_);
        Peer& peer = peers_[rank];
        if (peer.connection.fd >= 0) ::close(peer.connection.fd);
        peer.connection = std::move(c);
        peer.connection.in.erase(0, kHelloBytes);
        peer.heard_at = Clock::now();
        peer.disconnected = false;
      } else {
        ::close(c.fd);  // not one of this job's ranks
      }
      unidentified_.erase(unidentified_.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (!open) {
      ::close(c.fd);
      unidentified_.erase(unidentified_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

int TcpHeartbeats::take_announcements(uint64_t sequence) {
  int arrived = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  for (int rank = 1; rank < world_size_; ++rank) {
    Peer& peer = peers_[static_cast<size_t>(rank)];
    if (peer.connection.fd < 0) continue;
    const bool open = fill(peer.connection.fd, peer.connection.in);
    size_t used = 0;
    for (; used + kAnnounceBytes <= peer.connection.in.size(); used += kAnnounceBytes) {
      const auto latest = read_at<uint64_t>(peer.connection.in, used);
      if (peer.latest < sequence + 1 && latest >= sequence + 1) ++arrived;
      peer.latest = std::max(peer.latest, latest);
      peer.heard_at = Clock::now();
    }
    peer.connection.in.erase(0, used);
    if (!open) {
      ::close(peer.connection.fd);
      peer.connection.fd = -1;
      peer.disconnected = true;
    }
  }
  return arrived;
}

void TcpHeartbeats::send_tables() {
  std::string table;
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    peers_[0].heard_at = now;
    for (const Peer& peer : peers_) {
      append(table, peer.latest);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - peer.heard_at).count();
      append(table, static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, UINT32_MAX)));
      append(table, (peer.connection.fd >= 0 || &peer == &peers_[0] ? kHeard : 0) |
                        (peer.disconnected ? kDisconnected : 0));
    }
  }
  for (int rank = 1; rank < world_size_; ++rank) {
    Connection& c = peers_[static_cast<size_t>(rank)].connection;
    if (c.fd < 0) continue;
    if (c.out.size() <= kMaxQueuedBytes) c.out += table;
    flush(c.fd, c.out);
  }
}

int TcpHeartbeats::take_tables(uint64_t sequence) {
  if (to_root_.fd < 0) return 0;
  flush(to_root_.fd, to_root_.out);
  const bool open = fill(to_root_.fd, to_root_.in);
  const size_t table_bytes = kEntryBytes * static_cast<size_t>(world_size_);
  int arrived = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  while (to_root_.in.size() >= table_bytes) {
    const Clock::time_point now = Clock::now();
    for (int rank = 0; rank < world_size_; ++rank) {
      if (rank == rank_) continue;
      Peer& peer = peers_[static_cast<size_t>(rank)];
      const size_t at = kEntryBytes * static_cast<size_t>(rank);
      const auto latest = read_at<uint64_t>(to_root_.in, at);
      const auto ms = read_at<uint32_t>(to_root_.in, at + 8);
      const auto flags = read_at<uint32_t>(to_root_.in, at + 12);
      if (peer.latest < sequence + 1 && latest >= sequence + 1) ++arrived;
      peer.latest = latest;
      peer.heard_at = now - std::chrono::milliseconds(ms);
      peer.disconnected = (flags & kDisconnected) != 0;
    }
    to_root_.in.erase(0, table_bytes);
  }
  if (!open) {
    ::close(to_root_.fd);
    to_root_.fd = -1;
    peers_[0].disconnected = true;
  }
  return arrived;
}

std::string TcpHeartbeats::describe_missing(uint64_t sequence, double silent_after_seconds) const {
  std::vector<PeerHeard> heard;
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  for (int rank = 0; rank < world_size_; ++rank) {
    if (rank == rank_) continue;
    const Peer& peer = peers_[static_cast<size_t>(rank)];
    heard.push_back({.rank = rank,
                     .latest = peer.latest,
                     .seconds_ago = std::chrono::duration<double>(now - peer.heard_at).count(),
                     .disconnected = peer.disconnected});
  }
  return describe_missing_ranks(heard, sequence, silent_after_seconds);
}

}  // namespace nanoforge
