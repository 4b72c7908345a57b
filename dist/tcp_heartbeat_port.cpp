// Rank 0's heartbeat port (tcp_heartbeats.h): a thread of its own accepts connections and admits one only
// once its hello has proved the job's key, bound to this run's session and never replayed; at most a few
// unauthenticated connections wait at once, each for a few seconds, and refusals reach stderr at most once a
// minute. docs/distributed.md has the bounds and why they hold under a flood.
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "dist/tcp_heartbeats.h"
#include "dist/tcp_io.h"

namespace nanoforge {
namespace {

using Clock = TcpClock;

// Unauthenticated connections rank 0 holds at once, besides one per rank not yet admitted; one more closes
// the oldest (after a last read of it). A rank's hello comes with its connection, so a rank is admitted as it
// is accepted and does not compete with a flood for these places.
constexpr size_t kSpareHandshakes = 16;
// Connections accepted per turn of the port thread, which then reads the handshakes in progress again.
constexpr int kAcceptBurst = 64;
// How long the port thread leaves its listener alone after accept() found no descriptor (EMFILE, ENFILE).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// Refusals after the first are counted and reported on stderr at most this often.
constexpr auto kReportEvery = std::chrono::seconds(60);

}  // namespace

// Rank 0's port thread: one poll() over the wake-up descriptor, the listener and the handshakes in progress,
// woken by whichever comes first of them, a handshake's deadline, the end of a pause and the next report.
void TcpHeartbeats::serve_port() {
  std::vector<pollfd> fds;
  while (!stopping_.load()) {
    close_late_handshakes();
    flush_report();
    const Clock::time_point now = Clock::now();
    const bool accepting = now >= accept_paused_until_;
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({accepting ? listener_ : -1, POLLIN, 0});  // a negative descriptor is left out
    for (const Handshake& handshake : handshakes_)
      fds.push_back({handshake.fd, POLLIN, 0});
    Clock::time_point wake = now + kReportEvery;
    if (!accepting) wake = std::min(wake, accept_paused_until_);
    if (!handshakes_.empty()) wake = std::min(wake, handshakes_.front().deadline);  // the oldest's is first
    if (unreported_ > 0) wake = std::min(wake, reported_at_ + kReportEvery);
    const int ready = ::poll(fds.data(), fds.size(), tcp_remaining_ms(wake));
    if (ready < 0 && errno != EINTR) std::this_thread::sleep_for(kAcceptPause);  // not worth a busy loop
    if (ready <= 0) continue;  // a deadline: closed at the top
    if (fds[0].revents != 0) break;
    for (size_t i = handshakes_.size(); i-- > 0;) {
      if (fds[2 + i].revents == 0) continue;
      if (receive_hello(handshakes_[i])) handshakes_.erase(handshakes_.begin() + static_cast<ptrdiff_t>(i));
    }
    if (fds[1].revents & POLLIN) {
      accept_connections();
    } else if (fds[1].revents != 0) {  // the listener itself failed: not worth a busy loop
      accept_paused_until_ = Clock::now() + kAcceptPause;
    }
  }
}

void TcpHeartbeats::accept_connections() {
  for (int i = 0; i < kAcceptBurst; ++i) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Something else in this process (or the system) holds the descriptors: the connection waits in the
        // kernel's queue, and no rank is affected.
        accept_paused_until_ = Clock::now() + kAcceptPause;
        report(fmt::format("cannot accept a connection: {}; new connections wait until descriptors are free",
                           std::strerror(errno)));
        return;
      }
      continue;  // a connection that went away before accept() took it
    }
    tcp_set_no_delay(fd);
    Handshake handshake;
    handshake.fd = fd;
    handshake.address = tcp_peer_address(fd);
    handshake.deadline = tcp_deadline_after(port_options_.hello_timeout_seconds);
    if (receive_hello(handshake)) continue;  // a rank's hello comes with its connection
    if (handshakes_.size() >= most_waiting()) {
      Handshake& oldest = handshakes_.front();
      if (!receive_hello(oldest)) {  // a last look: its hello may have come meanwhile
        refuse(oldest, fmt::format("it had not sent its hello when {} newer connections came (at most {} may "
                                   "wait to authenticate at once)",
                                   handshakes_.size(), most_waiting()));
      }
      handshakes_.pop_front();
    }
    handshakes_.push_back(std::move(handshake));
  }
}

// Reads what a connection sent, never beyond its hello. True when it is settled (admitted or refused).
bool TcpHeartbeats::receive_hello(Handshake& handshake) {
  while (handshake.received.size() < handshake.expected_bytes) {
    uint8_t buffer[128];
    const size_t wanted = std::min(sizeof(buffer), handshake.expected_bytes - handshake.received.size());
    const ssize_t got = ::recv(handshake.fd, buffer, wanted, 0);
    if (got == 0 || (got < 0 && errno == ECONNRESET)) {
      refuse(handshake, fmt::format("it closed the connection before its hello was complete ({} of {} bytes)",
                                    handshake.received.size(), handshake.expected_bytes));
      return true;
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
      refuse(handshake, fmt::format("receiving its hello: {}", std::strerror(errno)));
      return true;
    }
    handshake.received.insert(handshake.received.end(), buffer, buffer + got);
    if (handshake.received.size() == kRendezvousHeaderBytes &&
        handshake.expected_bytes == kRendezvousHeaderBytes) {
      const absl::StatusOr<size_t> length =
          parse_heartbeat_header(handshake.received, HeartbeatMessage::kHello);
      if (!length.ok()) {
        refuse(handshake, std::string(length.status().message()));
        return true;
      }
      handshake.expected_bytes += *length;
    }
  }
  const absl::StatusOr<HeartbeatHello> hello = parse_heartbeat_hello_body(
      std::span<const uint8_t>(handshake.received).subspan(kRendezvousHeaderBytes));
  if (!hello.ok()) {
    refuse(handshake, std::string(hello.status().message()));
    return true;
  }
  if (const absl::Status authentic = authenticate_heartbeat_hello(*hello, key_, session_); !authentic.ok()) {
    refuse(handshake, std::string(authentic.message()));
    return true;
  }
  if (static_cast<int64_t>(hello->world_size) != world_size_ || hello->rank == 0 ||
      static_cast<int64_t>(hello->rank) >= world_size_) {
    refuse(handshake, fmt::format("it authenticated as rank {} of {}, which is no peer of rank 0 of {}",
                                  hello->rank, hello->world_size, world_size_));
    return true;
  }
  const uint32_t admitted = admitted_attempt_[hello->rank];
  if (hello->attempt <= admitted) {
    refuse(handshake, fmt::format("it replayed a hello of rank {} (its connection attempt {}; rank 0 has "
                                  "admitted attempt {} of that rank)",
                                  hello->rank, hello->attempt, admitted));
    return true;
  }
  const std::vector<uint8_t> welcome = encode_heartbeat_welcome(key_, session_, *hello);
  // 48 bytes, the first this connection sends: its empty send buffer takes them whole.
  const ssize_t sent = ::send(handshake.fd, welcome.data(), welcome.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent != static_cast<ssize_t>(welcome.size())) {
    refuse(handshake,
           fmt::format("sending the welcome: {}", sent < 0 ? std::strerror(errno) : "partial send"));
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Peer& peer = peers_[hello->rank];
    if (peer.connection.fd >= 0) ::close(peer.connection.fd);  // the rank connected again: the newest counts
    peer.connection = Connection{.fd = handshake.fd, .in = {}, .out = {}};
    peer.heard_at = Clock::now();
    peer.disconnected = false;
  }
  handshake.fd = -1;
  admitted_attempt_[hello->rank] = hello->attempt;
  return true;
}

void TcpHeartbeats::close_late_handshakes() {
  const Clock::time_point now = Clock::now();
  while (!handshakes_.empty() && handshakes_.front().deadline <= now) {
    Handshake& late = handshakes_.front();
    refuse(late, fmt::format("it sent {} of {} bytes of its hello within {} s", late.received.size(),
                             late.expected_bytes, port_options_.hello_timeout_seconds));
    handshakes_.pop_front();
  }
}

size_t TcpHeartbeats::most_waiting() const {
  const auto missing = std::count(admitted_attempt_.begin() + 1, admitted_attempt_.end(), 0u);
  return kSpareHandshakes + static_cast<size_t>(missing);
}

void TcpHeartbeats::refuse(Handshake& handshake, const std::string& why) {
  report(fmt::format("refused a connection from {}: {}", handshake.address, why));
  ::close(handshake.fd);
  handshake.fd = -1;
}

void TcpHeartbeats::report(const std::string& line) {
  if (port_options_.on_refused) {
    port_options_.on_refused(line);
    return;
  }
  ++unreported_;
  last_unreported_ = line;
  flush_report();
}

// At most one line a minute on stderr, so that a flood cannot fill the log.
void TcpHeartbeats::flush_report() {
  const Clock::time_point now = Clock::now();
  if (unreported_ == 0 || (reported_once_ && now - reported_at_ < kReportEvery)) return;
  if (unreported_ == 1) {
    fmt::print(stderr, "nanoforge: rank 0: heartbeat port {}: {}\n", port_, last_unreported_);
  } else {
    fmt::print(
        stderr,
        "nanoforge: rank 0: heartbeat port {}: {} connections refused or not accepted in the last {:.0f} "
        "s; the last: {}\n",
        port_, unreported_, std::chrono::duration<double>(now - reported_at_).count(), last_unreported_);
  }
  std::fflush(stderr);
  unreported_ = 0;
  reported_at_ = now;
  reported_once_ = true;
}

}  // namespace nanoforge
