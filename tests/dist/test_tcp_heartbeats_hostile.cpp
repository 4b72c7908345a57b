// Rank 0's heartbeat port (dist/tcp_heartbeats.h) against hostile connections on the loopback, with rank 0
// in this process: the key, the session and replays (a hello without the key, of another run, replayed),
// garbage, idle and slow connections, the bound on waiting ones, a rank that connects during a flood,
// accept() without descriptors, and fake rank 0s that a rank must refuse. The flood against ranks in child
// processes is test_tcp_heartbeats_flood.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_heartbeats.h"
#include "tests/dist/connection_flood.h"
#include "tests/dist/raw_tcp_client.h"

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

// Every wait gives up after this long, so that a bug fails the test instead of hanging it (not a timing
// threshold: each answer should take milliseconds).
constexpr double kHangGuardSeconds = 30;

const RendezvousKey kJobKey =
    rendezvous_key_from_secret("the heartbeat port test's secret", "the job's secret");
const RendezvousKey kOtherJobKey = rendezvous_key_from_secret("another job's secret, 32 bytes!", "another");

// Waits (polling every 10 ms) until `done()`, at most the hang guard; whether it came.
bool eventually(const std::function<bool()>& done) {
  const auto give_up = Clock::now() + std::chrono::duration<double>(kHangGuardSeconds);
  while (!done()) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Rank 0 of a world of two in this process, with every refusal of its port kept.
class RankZero {
 public:
  explicit RankZero(double hello_timeout_seconds = 5) {
    TcpHeartbeatPortOptions options;
    options.hello_timeout_seconds = hello_timeout_seconds;
    options.on_refused = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      refusals_.push_back(line);
    };
    absl::StatusOr<std::unique_ptr<TcpHeartbeats>> channel =
        TcpHeartbeats::listen(kJobKey, 2, &address_, std::move(options));
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (channel.ok()) channel_ = *std::move(channel);
  }
  TcpHeartbeats& channel() { return *channel_; }
  const TcpHeartbeatAddress& address() const { return address_; }
  // Whether some refusal so far contains `fragment`.
  bool refused(const std::string& fragment) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& line : refusals_)
      if (line.find(fragment) != std::string::npos) return true;
    return false;
  }
  std::string refusals() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string text;
    for (const std::string& line : refusals_)
      text += line + "\n";
    return text;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> refusals_;
  TcpHeartbeatAddress address_;
  std::unique_ptr<TcpHeartbeats> channel_;  // last: destroyed (its port thread stopped) before the refusals
};

absl::StatusOr<std::unique_ptr<TcpHeartbeats>> connect_rank1(const RendezvousKey& key,
                                                             const TcpHeartbeatAddress& address,
                                                             double timeout_seconds = kHangGuardSeconds) {
  return TcpHeartbeats::connect(key, "127.0.0.1", address, 1, 2, timeout_seconds);
}

// Announces and polls on both ranks until each says the other is still answering; whether that came.
bool hear_each_other(TcpHeartbeats& rank0, TcpHeartbeats& rank1) {
  uint64_t sequence = 0;
  return eventually([&] {
    rank0.announce(sequence);
    rank1.announce(sequence);
    rank0.poll(sequence);
    rank1.poll(sequence);
    ++sequence;
    return rank0.describe_missing(0, 1.0).find("still answering") != std::string::npos &&
           rank1.describe_missing(0, 1.0).find("still answering") != std::string::npos;
  });
}

// A raw client of rank 0's heartbeat port (its reads give up after the hang guard).
class RawClient : public test::RawTcpClient {
 public:
  explicit RawClient(int port) : RawTcpClient(port, static_cast<int>(kHangGuardSeconds)) {}
  void announce(uint64_t sequence) {
    const uint64_t latest = sequence + 1;  // the channel's announcement, in this build's byte order
    EXPECT_EQ(::send(fd(), &latest, sizeof(latest), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(latest)));
  }
  // Whether rank 0 closed the connection (what it sent before is skipped), within the hang guard.
  bool closed_by_peer() {
    uint8_t buffer[256];
    while (true) {
      const ssize_t got = ::recv(fd(), buffer, sizeof(buffer), 0);
      if (got == 0 || (got < 0 && errno == ECONNRESET)) return true;
      if (got < 0) return false;
    }
  }
  // Whether the connection is still open with nothing to read.
  bool open_and_quiet() {
    uint8_t byte = 0;
    const ssize_t got = ::recv(fd(), &byte, 1, MSG_DONTWAIT);
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
};

TEST(TcpHeartbeatPort, RankThatHoldsTheKeyIsAdmittedAndBothHearEachOther) {
  RankZero rank0;
  absl::StatusOr<std::unique_ptr<TcpHeartbeats>> rank1 = connect_rank1(kJobKey, rank0.address());
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_TRUE(hear_each_other(rank0.channel(), **rank1));
  EXPECT_EQ(rank0.refusals(), "");
}

// A hello that does not authenticate is refused (the refusal is reported before the connection is closed);
// a rank that keeps being refused gives up after its timeout, naming the port.
void expect_refused(RankZero& rank0, const RendezvousKey& key, const TcpHeartbeatAddress& address,
                    const std::string& why) {
  RawClient stranger(address.port);
  stranger.send(encode_heartbeat_hello(key, address.session, 2, 1, 1, {}));
  EXPECT_TRUE(stranger.closed_by_peer());
  EXPECT_TRUE(rank0.refused(why)) << rank0.refusals();
  absl::StatusOr<std::unique_ptr<TcpHeartbeats>> rank1 = connect_rank1(key, address, 0.5);
  ASSERT_FALSE(rank1.ok());
  EXPECT_NE(rank1.status().message().find("rank 1: cannot reach rank 0's heartbeat port at 127.0.0.1:"),
            std::string::npos)
      << rank1.status();
  rank0.channel().poll(0);
  EXPECT_NE(rank0.channel().describe_missing(0, 1.0).find("rank 1: never heard from"), std::string::npos);
}

TEST(TcpHeartbeatPort, HelloWithoutTheKeyIsRefused) {
  RankZero rank0;
  expect_refused(rank0, kOtherJobKey, rank0.address(),
                 "its heartbeat hello (claiming rank 1) does not authenticate");
}

TEST(TcpHeartbeatPort, HelloOfAnotherRunIsRefused) {
  // The job's key, but the session of another rendezvous (a leftover rank of an earlier run of the job).
  RankZero rank0;
  TcpHeartbeatAddress another_run = rank0.address();
  another_run.session[0] ^= 1;
  expect_refused(rank0, kJobKey, another_run, "was not part of this run's rendezvous");
}

TEST(TcpHeartbeatPort, ReplayedHelloIsRefusedAndTheRankStaysAdmitted) {
  RankZero rank0;
  const TcpHeartbeatAddress& address = rank0.address();
  const HeartbeatHello sent{.world_size = 2, .rank = 1, .attempt = 1, .nonce = {7}};
  const std::vector<uint8_t> hello = encode_heartbeat_hello(kJobKey, address.session, 2, 1, 1, sent.nonce);
  RawClient genuine(address.port);
  genuine.send(hello);
  const std::vector<uint8_t> welcome = genuine.receive(kRendezvousHeaderBytes + kRendezvousMacBytes);
  ASSERT_EQ(welcome.size(), kRendezvousHeaderBytes + kRendezvousMacBytes);
  EXPECT_TRUE(check_heartbeat_welcome(std::span<const uint8_t>(welcome).subspan(kRendezvousHeaderBytes),
                                      kJobKey, address.session, sent)
                  .ok());
  genuine.announce(0);
  EXPECT_TRUE(eventually([&] { return rank0.channel().poll(0) == 1; }));

  // The same bytes on another connection, as someone who recorded them would send them.
  RawClient replayer(address.port);
  replayer.send(hello);
  EXPECT_TRUE(replayer.closed_by_peer());
  EXPECT_TRUE(
      rank0.refused("it replayed a hello of rank 1 (its connection attempt 1; rank 0 has admitted "
                    "attempt 1 of that rank)"))
      << rank0.refusals();
  genuine.announce(1);
  EXPECT_TRUE(eventually([&] { return rank0.channel().poll(1) == 1; })) << "the rank lost its place";

  // The rank itself connecting again (a later attempt) takes the place of its older connection.
  RawClient again(address.port);
  again.send(encode_heartbeat_hello(kJobKey, address.session, 2, 1, 2, sent.nonce));
  EXPECT_EQ(again.receive(kRendezvousHeaderBytes + kRendezvousMacBytes).size(),
            kRendezvousHeaderBytes + kRendezvousMacBytes);
  rank0.channel().poll(2);  // sends a table to the newest connection
  EXPECT_TRUE(genuine.closed_by_peer());
}

TEST(TcpHeartbeatPort, GarbageIsRefusedAtOnce) {
  RankZero rank0;
  const int port = rank0.address().port;
  const std::string http = "GET / HTTP/1.1\r\nHost: rank0\r\n\r\n";
  RawClient scanner(port);
  scanner.send({http.begin(), http.end()});
  EXPECT_TRUE(scanner.closed_by_peer());
  EXPECT_TRUE(
      rank0.refused("it does not speak the nanoforge heartbeat handshake (its first bytes are 47455420"))
      << rank0.refusals();
  // A rendezvous hello on the heartbeat port; a header announcing 4 GB.
  RawClient lost(port);
  lost.send(encode_hello(kJobKey, {}, 2, 1, {}));
  EXPECT_TRUE(lost.closed_by_peer());
  EXPECT_TRUE(rank0.refused("it sent message type 2 where a heartbeat hello was due")) << rank0.refusals();
  std::vector<uint8_t> oversized = encode_heartbeat_hello(kJobKey, rank0.address().session, 2, 1, 1, {});
  oversized.resize(kRendezvousHeaderBytes);
  oversized[12] = oversized[13] = oversized[14] = oversized[15] = 0xFF;
  RawClient greedy(port);
  greedy.send(oversized);
  EXPECT_TRUE(greedy.closed_by_peer());
  EXPECT_TRUE(rank0.refused("it announced a 4294967295-byte heartbeat hello")) << rank0.refusals();
}

TEST(TcpHeartbeatPort, IdleAndSlowConnectionsAreClosedAfterTheHelloTimeout) {
  constexpr double kHelloTimeoutSeconds = 0.3;
  RankZero rank0(kHelloTimeoutSeconds);
  const auto start = Clock::now();
  RawClient idle(rank0.address().port);
  RawClient slow(rank0.address().port);
  std::vector<uint8_t> part = encode_heartbeat_hello(kJobKey, rank0.address().session, 2, 1, 1, {});
  part.resize(10);
  slow.send(part);
  EXPECT_TRUE(idle.closed_by_peer());
  EXPECT_TRUE(slow.closed_by_peer());
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - start).count(), kHelloTimeoutSeconds);
  EXPECT_TRUE(rank0.refused("it sent 0 of 16 bytes of its hello within 0.3 s")) << rank0.refusals();
  EXPECT_TRUE(rank0.refused("it sent 10 of 16 bytes of its hello within 0.3 s")) << rank0.refusals();
}

TEST(TcpHeartbeatPort, AtMostSixteenWaitToAuthenticateAndTheOldestIsClosedFirst) {
  RankZero rank0(kHangGuardSeconds);  // no hello timeout within the test: only the bound closes them
  absl::StatusOr<std::unique_ptr<TcpHeartbeats>> rank1 = connect_rank1(kJobKey, rank0.address());
  ASSERT_TRUE(rank1.ok()) << rank1.status();  // every rank is in: 16 may wait
  std::vector<std::unique_ptr<RawClient>> waiting;
  for (int i = 0; i < 16; ++i)
    waiting.push_back(std::make_unique<RawClient>(rank0.address().port));
  RawClient newest(rank0.address().port);
  EXPECT_TRUE(waiting[0]->closed_by_peer());
  EXPECT_TRUE(rank0.refused("it had not sent its hello when 16 newer connections came")) << rank0.refusals();
  for (size_t i = 1; i < waiting.size(); ++i)
    EXPECT_TRUE(waiting[i]->open_and_quiet()) << "connection " << i << " was closed too";
  EXPECT_TRUE(newest.open_and_quiet());
}

TEST(TcpHeartbeatPort, RankThatConnectsDuringAFloodGetsIn) {
  test::ConnectionFlood::allow_descriptors(1024);
  RankZero rank0;
  std::atomic<bool> flooding{true};
  std::thread attacker([&] {
    test::ConnectionFlood flood(rank0.address().port, 200, 50);
    flood.sustain([&] { return flooding.load(); });
  });
  // The flood is up once it has pushed connections out of the bound.
  EXPECT_TRUE(eventually([&] { return rank0.refused("newer connections came"); })) << rank0.refusals();
  absl::StatusOr<std::unique_ptr<TcpHeartbeats>> rank1 = connect_rank1(kJobKey, rank0.address());
  EXPECT_TRUE(rank1.ok()) << rank1.status();
  if (rank1.ok()) {
    EXPECT_TRUE(hear_each_other(rank0.channel(), **rank1));
  }
  flooding.store(false);
  attacker.join();
}

// Restores this process's descriptor limit when it goes.
class DescriptorLimit {
 public:
  DescriptorLimit() { ::getrlimit(RLIMIT_NOFILE, &saved_); }
  ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  void lower_to(rlim_t descriptors) {
    const rlimit lowered{descriptors, saved_.rlim_max};
    ::setrlimit(RLIMIT_NOFILE, &lowered);
  }

 private:
  rlimit saved_{};
};

// Something else in rank 0's process holds every descriptor: accept() fails with EMFILE. That is reported,
// counts against no rank (both still hear each other), and the connection is taken once descriptors free up.
TEST(TcpHeartbeatPort, AcceptWithoutDescriptorsCountsAgainstNoRank) {
  RankZero rank0(0.3);
  absl::StatusOr<std::unique_ptr<TcpHeartbeats>> rank1 = connect_rank1(kJobKey, rank0.address());
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(hear_each_other(rank0.channel(), **rank1));
  std::vector<int> hogs;
  std::unique_ptr<RawClient> stranger;
  {
    DescriptorLimit limit;
    int highest = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
      highest = std::max(highest, std::stoi(entry.path().filename().string()));
    limit.lower_to(static_cast<rlim_t>(highest) + 8);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
      hogs.push_back(fd);
    ::close(hogs.back());  // one left: the stranger's socket
    hogs.pop_back();
    stranger = std::make_unique<RawClient>(rank0.address().port);
    EXPECT_TRUE(eventually([&] { return rank0.refused("cannot accept a connection: Too many open files"); }))
        << rank0.refusals();
    EXPECT_TRUE(hear_each_other(rank0.channel(), **rank1));
    for (const int fd : hogs)
      ::close(fd);
  }
  // Descriptors are free again: the waiting connection is accepted, and closed after the hello timeout.
  EXPECT_TRUE(stranger->closed_by_peer());
  EXPECT_TRUE(rank0.refused("of its hello within 0.3 s")) << rank0.refusals();
  EXPECT_TRUE(hear_each_other(rank0.channel(), **rank1));
}

// A fake rank 0 on the announced port: one that sends garbage, one whose welcome does not authenticate.
TEST(TcpHeartbeatPort, RankRefusesAFakeRankZero) {
  for (const bool garbage : {true, false}) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(any);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
    ASSERT_EQ(::listen(listener, 4), 0);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&any), &length);
    TcpHeartbeatAddress address;
    address.port = ntohs(any.sin_port);
    std::thread fake([&] {
      const int fd = ::accept(listener, nullptr, nullptr);
      std::vector<uint8_t> reply(kRendezvousHeaderBytes + kRendezvousMacBytes, 0x47);
      if (!garbage) {
        const HeartbeatHello someone{.world_size = 2, .rank = 1, .attempt = 1, .nonce = {}};
        reply = encode_heartbeat_welcome(kOtherJobKey, address.session, someone);
      }
      (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ::close(fd);
    });
    const absl::StatusOr<std::unique_ptr<TcpHeartbeats>> rank1 = connect_rank1(kJobKey, address);
    fake.join();
    ::close(listener);
    ASSERT_FALSE(rank1.ok());
    EXPECT_NE(rank1.status().message().find(garbage ? "does not speak the nanoforge heartbeat handshake"
                                                    : "its heartbeat welcome does not authenticate"),
              std::string::npos)
        << rank1.status();
  }
}

}  // namespace
}  // namespace nanoforge
