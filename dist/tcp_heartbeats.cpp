// TcpHeartbeats (tcp_heartbeats.h) but rank 0's port thread (tcp_heartbeat_port.cpp). The handshake is
// rendezvous_protocol.h's heartbeat messages: the rank's hello as it connects, rank 0's welcome. After it, in
// this build's byte order (every rank runs the same binary): a rank's announcements (1 + sequence, 8 bytes
// each); rank 0's tables (per rank: 1 + latest sequence, 8 bytes; milliseconds since heard, 4; flags, 4:
// heard, disconnected).
#include "dist/tcp_heartbeats.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "dist/launch_env.h"
#include "dist/tcp_io.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using Clock = TcpClock;

constexpr size_t kAnnounceBytes = 8;
constexpr size_t kEntryBytes = 16;
constexpr uint32_t kHeard = 1, kDisconnected = 2;
// At most this much waits to be written to one connection; beyond it tables are dropped (a peer not reading).
constexpr size_t kMaxQueuedBytes = 64 << 10;
// At most this much is read from one connection per poll, so that no peer holds up the others.
constexpr size_t kMaxReadBytes = 64 << 10;
constexpr auto kConnectAttempt = std::chrono::seconds(5);  // one connect() to one address
constexpr auto kConnectRetry = std::chrono::milliseconds(100);

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

// Reads what has arrived, up to kMaxReadBytes; false when the peer closed or the connection broke.
bool fill(int fd, std::string& in) {
  char buffer[4096];
  for (size_t taken = 0; taken < kMaxReadBytes;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      in.append(buffer, static_cast<size_t>(n));
      taken += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
  return true;
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

// The rank's side of the handshake, on a non-blocking socket with deadlines. ABORTED when the connection
// closed or could not be made (worth another try while time is left), DEADLINE_EXCEEDED when the time is up;
// other errors are final.
absl::Status wait_ready(int fd, short events, Clock::time_point deadline, const char* what) {
  while (true) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, tcp_remaining_ms(deadline));
    if (ready > 0) return absl::OkStatus();
    if (ready == 0) return absl::DeadlineExceededError(fmt::format("timed out waiting for {}", what));
    if (errno != EINTR) return absl::UnavailableError(fmt::format("poll: {}", std::strerror(errno)));
  }
}

absl::Status send_all(int fd, const std::vector<uint8_t>& bytes, Clock::time_point deadline,
                      const char* what) {
  for (size_t sent = 0; sent < bytes.size();) {
    NANOFORGE_RETURN_IF_ERROR(wait_ready(fd, POLLOUT, deadline, what));
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (errno != EAGAIN && errno != EINTR) {
      return absl::AbortedError(fmt::format("sending {}: {}", what, std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status receive_all(int fd, std::span<uint8_t> bytes, Clock::time_point deadline, const char* what) {
  for (size_t got = 0; got < bytes.size();) {
    NANOFORGE_RETURN_IF_ERROR(wait_ready(fd, POLLIN, deadline, what));
    const ssize_t n = ::recv(fd, bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno == ECONNRESET) {
      return absl::AbortedError(fmt::format("rank 0 closed the connection before {} arrived", what));
    } else if (errno != EAGAIN && errno != EINTR) {
      return absl::AbortedError(fmt::format("receiving {}: {}", what, std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// One message of type `expected`, its header checked before the body is read.
absl::StatusOr<std::vector<uint8_t>> receive_message(int fd, HeartbeatMessage expected,
                                                     Clock::time_point deadline, const char* what) {
  std::array<uint8_t, kRendezvousHeaderBytes> header;
  NANOFORGE_RETURN_IF_ERROR(receive_all(fd, header, deadline, what));
  const absl::StatusOr<size_t> length = parse_heartbeat_header(header, expected);
  if (!length.ok())
    return absl::DataLossError(fmt::format("{}: {}", what, std::string(length.status().message())));
  std::vector<uint8_t> body(*length);
  NANOFORGE_RETURN_IF_ERROR(receive_all(fd, body, deadline, what));
  return body;
}

// Connects `fd` to `to` and authenticates both ways: this rank's hello, rank 0's welcome.
absl::Status handshake(int fd, const addrinfo& to, const RendezvousKey& key,
                       const TcpHeartbeatAddress& address, uint32_t rank, uint32_t world_size,
                       uint32_t attempt, Clock::time_point deadline) {
  if (::connect(fd, to.ai_addr, to.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return absl::AbortedError(std::strerror(errno));
    const absl::Status ready =
        wait_ready(fd, POLLOUT, std::min(deadline, Clock::now() + kConnectAttempt), "the connection");
    if (!ready.ok()) return absl::AbortedError(std::string(ready.message()));
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return absl::AbortedError(std::strerror(error));
  }
  tcp_set_no_delay(fd);
  NANOFORGE_ASSIGN_OR_RETURN(const RendezvousNonce nonce, random_rendezvous_nonce());
  const HeartbeatHello hello{.world_size = world_size, .rank = rank, .attempt = attempt, .nonce = nonce};
  NANOFORGE_RETURN_IF_ERROR(
      send_all(fd, encode_heartbeat_hello(key, address.session, world_size, rank, attempt, nonce), deadline,
               "the heartbeat hello"));
  NANOFORGE_ASSIGN_OR_RETURN(
      const std::vector<uint8_t> welcome,
      receive_message(fd, HeartbeatMessage::kWelcome, deadline, "rank 0's heartbeat welcome"));
  return check_heartbeat_welcome(welcome, key, address.session, hello);
}

}  // namespace

TcpHeartbeats::TcpHeartbeats(int rank, int world_size)
    : rank_(rank), world_size_(world_size), peers_(static_cast<size_t>(world_size)) {
  for (Peer& peer : peers_)
    peer.heard_at = Clock::now();
}

TcpHeartbeats::~TcpHeartbeats() {
  if (port_thread_.joinable()) {
    stopping_.store(true);
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t woken = ::write(wake_fd_, &one, sizeof(one));
    port_thread_.join();
  }
  for (Handshake& handshake : handshakes_)
    ::close(handshake.fd);
  for (Peer& peer : peers_)
    if (peer.connection.fd >= 0) ::close(peer.connection.fd);
  if (to_root_.fd >= 0) ::close(to_root_.fd);
  if (listener_ >= 0) ::close(listener_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

absl::StatusOr<std::unique_ptr<TcpHeartbeats>> TcpHeartbeats::listen(const RendezvousKey& key, int world_size,
                                                                     TcpHeartbeatAddress* address,
                                                                     TcpHeartbeatPortOptions options) {
  std::unique_ptr<TcpHeartbeats> channel(new TcpHeartbeats(0, world_size));
  channel->key_ = key;
  channel->port_options_ = std::move(options);
  channel->admitted_attempt_.assign(static_cast<size_t>(world_size), 0);
  channel->listener_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  socklen_t length = sizeof(any);
  const int no = 0;
  // The longest queue the kernel allows: a queued connection costs no descriptor, and a rank's connection
  // queued behind a flood is taken in turn rather than dropped (and retried seconds later) by a full queue.
  if (channel->listener_ < 0 ||
      ::setsockopt(channel->listener_, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no)) != 0 ||
      ::bind(channel->listener_, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 ||
      ::listen(channel->listener_, SOMAXCONN) != 0 ||
      ::getsockname(channel->listener_, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    return absl::UnavailableError(
        fmt::format("rank 0: cannot listen for heartbeats: {}", std::strerror(errno)));
  }
  if (RAND_bytes(channel->session_.data(), static_cast<int>(channel->session_.size())) != 1)
    return absl::UnavailableError("rank 0: no random bytes for the heartbeat session (RAND_bytes failed)");
  channel->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (channel->wake_fd_ < 0)
    return absl::UnavailableError(
        fmt::format("rank 0: cannot serve the heartbeat port: eventfd: {}", std::strerror(errno)));
  channel->port_ = ntohs(any.sin6_port);
  address->port = static_cast<uint16_t>(channel->port_);
  address->session = channel->session_;
  channel->port_thread_ = std::thread([serving = channel.get()] { serving->serve_port(); });
  return channel;
}

absl::StatusOr<std::unique_ptr<TcpHeartbeats>> TcpHeartbeats::connect(const RendezvousKey& key,
                                                                      const std::string& master_addr,
                                                                      const TcpHeartbeatAddress& address,
                                                                      int rank, int world_size,
                                                                      double timeout_seconds) {
  std::unique_ptr<TcpHeartbeats> channel(new TcpHeartbeats(rank, world_size));
  const Clock::time_point deadline = tcp_deadline_after(timeout_seconds);
  const std::string where = fmt::format("rank 0's heartbeat port at {}:{}", master_addr, address.port);
  std::string failure = "no address";
  uint32_t attempt = 0;
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(address.port);
    if (const int error = ::getaddrinfo(master_addr.c_str(), port.c_str(), &hints, &found); error != 0) {
      failure = ::gai_strerror(error);
    } else {
      for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
          failure = std::strerror(errno);
          continue;
        }
        const absl::Status done = handshake(fd, *a, key, address, static_cast<uint32_t>(rank),
                                            static_cast<uint32_t>(world_size), ++attempt, deadline);
        if (done.ok()) {
          channel->to_root_.fd = fd;
          break;
        }
        ::close(fd);
        failure = std::string(done.message());
        if (absl::IsDeadlineExceeded(done)) break;  // no time left for another address
        if (!absl::IsAborted(done)) {
          ::freeaddrinfo(found);
          return absl::Status(done.code(), fmt::format("rank {}: {}: {}", rank, where, failure));
        }
      }
      ::freeaddrinfo(found);
    }
    if (channel->to_root_.fd >= 0) return channel;
    if (Clock::now() + kConnectRetry >= deadline) {
      return absl::UnavailableError(
          fmt::format("rank {}: cannot reach {} within {} s: {}", rank, where, timeout_seconds, failure));
    }
    std::this_thread::sleep_for(kConnectRetry);
  }
}

absl::StatusOr<std::unique_ptr<TcpHeartbeats>> TcpHeartbeats::listen(int world_size,
                                                                     TcpHeartbeatAddress* address) {
  NANOFORGE_ASSIGN_OR_RETURN(const RendezvousKey key, rendezvous_key_from_env(process_env));
  return listen(key, world_size, address);
}

absl::StatusOr<std::unique_ptr<TcpHeartbeats>> TcpHeartbeats::connect(const std::string& master_addr,
                                                                      const TcpHeartbeatAddress& address,
                                                                      int rank, int world_size,
                                                                      double timeout_seconds) {
  NANOFORGE_ASSIGN_OR_RETURN(const RendezvousKey key, rendezvous_key_from_env(process_env));
  return connect(key, master_addr, address, rank, world_size, timeout_seconds);
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
  const int arrived = take_announcements(sequence);
  send_tables();
  return arrived;
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
  std::lock_guard<std::mutex> lock(mutex_);  // the port thread admits ranks meanwhile
  peers_[0].heard_at = now;
  for (const Peer& peer : peers_) {
    append(table, peer.latest);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - peer.heard_at).count();
    append(table, static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, UINT32_MAX)));
    append(table, (peer.connection.fd >= 0 || &peer == &peers_[0] ? kHeard : 0) |
                      (peer.disconnected ? kDisconnected : 0));
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
