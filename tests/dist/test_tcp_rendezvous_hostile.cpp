// The TCP rendezvous against hostile peers on the loopback. Rank 0 runs in a thread and must refuse, naming
// the peer's address, a rank with another job's secret, garbage, an oversized length, an old protocol, a
// client that connects and closes, one that never finishes its hello (slowloris), a flood of them, and a
// replayed hello — and still admit the genuine rank that comes meanwhile. A genuine rank must refuse a fake
// rank 0 that sends garbage, an oversized reply or a payload it cannot authenticate.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_rendezvous.h"
#include "tests/dist/raw_tcp_client.h"

namespace nanoforge {
namespace {

const RendezvousKey kJobKey =
    rendezvous_key_from_secret("this job's secret, 32 bytes long", "the job's secret");
const RendezvousKey kOtherJobKey =
    rendezvous_key_from_secret("another job's secret, 32 bytes!", "another secret");

// Socket calls of the hostile side give up after this long, so that a rendezvous bug fails the test instead
// of hanging it (not a timing threshold: nothing here should take more than a fraction of it).
constexpr int kHangGuardSeconds = 30;

// A listening socket on a port the kernel picked; `port` says which.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(fd, 16), 0);
    socklen_t length = sizeof(address);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  }
  ~Listener() { ::close(fd); }
};

int free_port() {
  Listener listener;
  return listener.port;  // free again once the listener closes
}

void guard(int fd) {
  const timeval limit{kHangGuardSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
}

// A raw client of rank 0's rendezvous port (connecting while rank 0 is not listening yet).
class RawClient : public test::RawTcpClient {
 public:
  explicit RawClient(int port) : RawTcpClient(port, kHangGuardSeconds) {}
  // rank 0's challenge nonce (the message is 32 bytes).
  RendezvousNonce challenge() {
    const std::vector<uint8_t> message = receive(kRendezvousHeaderBytes + kRendezvousNonceBytes);
    EXPECT_EQ(message.size(), kRendezvousHeaderBytes + kRendezvousNonceBytes);
    RendezvousNonce nonce{};
    if (message.size() == nonce.size() + kRendezvousHeaderBytes)
      std::copy(message.begin() + kRendezvousHeaderBytes, message.end(), nonce.begin());
    return nonce;
  }
  // Whether rank 0 closed the connection: reading ends (end of file or a reset) after at most the challenge
  // this client did not read.
  bool closed_by_peer() {
    std::array<uint8_t, 64> buffer;
    size_t unread = 0;
    while (unread <= kRendezvousHeaderBytes + kRendezvousNonceBytes) {
      const ssize_t got = ::recv(fd(), buffer.data(), buffer.size(), 0);
      if (got == 0 || (got < 0 && errno == ECONNRESET)) return true;
      if (got < 0) return false;  // the hang guard's timeout
      unread += static_cast<size_t>(got);
    }
    return false;
  }
};

std::vector<uint8_t> words(std::initializer_list<uint32_t> values) {
  std::vector<uint8_t> bytes;
  for (uint32_t value : values)
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<uint8_t>(value >> shift));
  return bytes;
}

const std::vector<uint8_t> kPayload = {9, 8, 7, 6, 5, 4, 3, 2, 1};

RendezvousOptions options_for(int port, int rank, const RendezvousKey& key = kJobKey) {
  return {.master_addr = "127.0.0.1",
          .master_port = port,
          .rank = rank,
          .world_size = 2,
          .timeout_seconds = 20,
          .key = key,
          .hello_timeout_seconds = 10,
          .on_refused = {}};
}

// Rank 0 of a world of two in a thread, recording what it refused.
class RankZero {
 public:
  explicit RankZero(int port, double hello_timeout_seconds = 10) {
    RendezvousOptions options = options_for(port, 0);
    options.hello_timeout_seconds = hello_timeout_seconds;
    options.on_refused = [this](const std::string& note) {
      std::lock_guard<std::mutex> lock(mutex_);
      notes_.push_back(note);
    };
    result_ = std::async(std::launch::async, [options] { return tcp_rendezvous(options, kPayload); });
  }
  absl::StatusOr<std::vector<uint8_t>> result() { return result_.get(); }
  std::vector<std::string> notes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return notes_;
  }
  // Waits until rank 0 has refused `count` connections (bounded by the hang guard).
  std::vector<std::string> wait_for_notes(size_t count) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(kHangGuardSeconds);
    while (notes().size() < count && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return notes();
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> notes_;
  std::future<absl::StatusOr<std::vector<uint8_t>>> result_;
};

// The genuine rank 1 joins; rank 0 and rank 1 both end with the payload.
void expect_genuine_rank_admitted(RankZero& rank0, int port) {
  absl::StatusOr<std::vector<uint8_t>> rank1 = tcp_rendezvous(options_for(port, 1), {});
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(*rank1, kPayload);
  absl::StatusOr<std::vector<uint8_t>> own = rank0.result();
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(*own, kPayload);
}

void expect_note(const std::vector<std::string>& notes, const std::string& fragment) {
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("refused a connection from 127.0.0.1:"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find(fragment), std::string::npos) << notes[0];
}

TEST(TcpRendezvousHostile, RankWithAnotherJobsSecretIsRefused) {
  const int port = free_port();
  RankZero rank0(port);
  absl::StatusOr<std::vector<uint8_t>> stranger = tcp_rendezvous(options_for(port, 1, kOtherJobKey), {});
  ASSERT_FALSE(stranger.ok());
  // The stranger learns that the keys differ, and where it was talking to.
  EXPECT_NE(stranger.status().message().find("rank 1 with rank 0 at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << stranger.status();
  EXPECT_NE(stranger.status().message().find("its reply does not authenticate"), std::string::npos)
      << stranger.status();
  expect_note(rank0.wait_for_notes(1), "its hello (claiming rank 1) does not authenticate");
  expect_genuine_rank_admitted(rank0, port);
}

TEST(TcpRendezvousHostile, GarbageIsRefused) {
  const int port = free_port();
  RankZero rank0(port);
  RawClient client(port);
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  client.send({request.begin(), request.end()});
  expect_note(rank0.wait_for_notes(1), "does not speak the nanoforge rendezvous");
  EXPECT_TRUE(client.closed_by_peer());
  expect_genuine_rank_admitted(rank0, port);
}

TEST(TcpRendezvousHostile, OversizedLengthIsRefusedBeforeAnyBody) {
  const int port = free_port();
  RankZero rank0(port);
  RawClient client(port);
  client.challenge();
  client.send(words({kRendezvousMagic, kRendezvousVersion, 2, 0xFFFFFFF0}));
  expect_note(rank0.wait_for_notes(1), "announced a 4294967280-byte hello (a hello is 56 bytes)");
  EXPECT_TRUE(client.closed_by_peer());
  expect_genuine_rank_admitted(rank0, port);
}

TEST(TcpRendezvousHostile, OldProtocolVersionIsNamed) {
  const int port = free_port();
  RankZero rank0(port);
  RawClient client(port);
  client.send(words({kRendezvousMagic, 1, 2, 1}));  // version 1's hello: {magic, version, world size, rank}
  expect_note(rank0.wait_for_notes(1), "speaks rendezvous version 1, this nanoforge speaks 2");
  expect_genuine_rank_admitted(rank0, port);
}

TEST(TcpRendezvousHostile, ClientThatConnectsAndClosesIsRefused) {
  const int port = free_port();
  RankZero rank0(port);
  { RawClient client(port); }
  expect_note(rank0.wait_for_notes(1), "closed the connection before its hello was complete (0 of 16 bytes)");
  expect_genuine_rank_admitted(rank0, port);
}

TEST(TcpRendezvousHostile, SlowlorisHoldsUpNoOne) {
  const int port = free_port();
  RankZero rank0(port);
  RawClient slowloris(port);
  slowloris.send(words({kRendezvousMagic}));  // 4 bytes of a hello's header, then nothing
  // The genuine rank gets in while the slowloris still holds its connection open.
  expect_genuine_rank_admitted(rank0, port);
  EXPECT_TRUE(rank0.notes().empty());
}

TEST(TcpRendezvousHostile, SlowlorisIsDroppedAfterTheHelloTimeout) {
  const int port = free_port();
  RankZero rank0(port, /*hello_timeout_seconds=*/1);
  RawClient slowloris(port);
  slowloris.send(words({kRendezvousMagic}));
  expect_note(rank0.wait_for_notes(1), "it sent 4 of 16 bytes of its hello within 1 s");
  EXPECT_TRUE(slowloris.closed_by_peer());
  expect_genuine_rank_admitted(rank0, port);
}

TEST(TcpRendezvousHostile, FloodOfIdleConnectionsDelaysButDoesNotStopTheGenuineRank) {
  const int port = free_port();
  RankZero rank0(port, /*hello_timeout_seconds=*/2);
  std::vector<std::unique_ptr<RawClient>> flood;
  for (int i = 0; i < 100; ++i)
    flood.push_back(std::make_unique<RawClient>(port));
  // Rank 0 keeps at most 64 waiting and closes the others at once; the genuine rank, closed too while the
  // queue is full, retries until idle ones time out.
  expect_genuine_rank_admitted(rank0, port);
  size_t turned_away = 0;
  for (const std::string& note : rank0.notes())
    turned_away += note.find("64 connections already wait to authenticate") != std::string::npos;
  EXPECT_GE(turned_away, 1u);
}

TEST(TcpRendezvousHostile, ReplayedHelloIsRefused) {
  // A fake rank 0 records a genuine rank 1's hello...
  Listener fake;
  std::future<absl::StatusOr<std::vector<uint8_t>>> victim = std::async(std::launch::async, [&] {
    RendezvousOptions options = options_for(fake.port, 1);
    options.timeout_seconds = 5;
    return tcp_rendezvous(options, {});
  });
  const int connection = ::accept(fake.fd, nullptr, nullptr);
  ASSERT_GE(connection, 0);
  guard(connection);
  std::vector<uint8_t> challenge = words({kRendezvousMagic, kRendezvousVersion, 1, kRendezvousNonceBytes});
  challenge.resize(challenge.size() + kRendezvousNonceBytes, 0x5A);
  ASSERT_EQ(::send(connection, challenge.data(), challenge.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(challenge.size()));
  std::vector<uint8_t> recorded(kRendezvousHeaderBytes + 56);
  ASSERT_EQ(::recv(connection, recorded.data(), recorded.size(), MSG_WAITALL),
            static_cast<ssize_t>(recorded.size()));
  ::close(connection);
  EXPECT_FALSE(victim.get().ok());
  // ...and replays it to the real one, which challenged this connection with another nonce.
  const int port = free_port();
  RankZero rank0(port);
  RawClient replayer(port);
  replayer.challenge();
  replayer.send(recorded);
  expect_note(rank0.wait_for_notes(1), "its hello (claiming rank 1) does not authenticate");
  expect_genuine_rank_admitted(rank0, port);
}

// A fake rank 0 that challenges, reads the hello and answers with `reply` (built from the hello it read).
absl::Status genuine_rank_against_fake_rank_zero(
    const std::function<std::vector<uint8_t>(const RendezvousNonce& challenge,
                                             const std::vector<uint8_t>& hello)>& reply) {
  Listener fake;
  std::future<absl::StatusOr<std::vector<uint8_t>>> rank1 =
      std::async(std::launch::async, [&] { return tcp_rendezvous(options_for(fake.port, 1), {}); });
  const int connection = ::accept(fake.fd, nullptr, nullptr);
  EXPECT_GE(connection, 0);
  guard(connection);
  RendezvousNonce challenge;
  challenge.fill(0x33);
  std::vector<uint8_t> message = encode_challenge({.nonce = challenge});
  ::send(connection, message.data(), message.size(), MSG_NOSIGNAL);
  std::vector<uint8_t> hello(kRendezvousHeaderBytes + 56);
  ::recv(connection, hello.data(), hello.size(), MSG_WAITALL);
  const std::vector<uint8_t> answer = reply(challenge, hello);
  ::send(connection, answer.data(), answer.size(), MSG_NOSIGNAL);
  absl::StatusOr<std::vector<uint8_t>> result = rank1.get();
  ::close(connection);
  EXPECT_FALSE(result.ok()) << "accepted a payload from a fake rank 0";
  return result.status();
}

TEST(TcpRendezvousHostile, FakeRankZeroWithOversizedReplyIsRefused) {
  const absl::Status status =
      genuine_rank_against_fake_rank_zero([](const RendezvousNonce&, const std::vector<uint8_t>&) {
        return words({kRendezvousMagic, kRendezvousVersion, 3, 0xFFFFFFFF});
      });
  EXPECT_NE(status.message().find("with rank 0 at 127.0.0.1:"), std::string::npos) << status;
  EXPECT_NE(status.message().find("rank 0's reply: it announced a 4294967295-byte reply"), std::string::npos)
      << status;
}

TEST(TcpRendezvousHostile, FakeRankZeroWithForgedPayloadIsRefused) {
  const absl::Status status = genuine_rank_against_fake_rank_zero(
      [](const RendezvousNonce& challenge, const std::vector<uint8_t>& hello) {
        absl::StatusOr<RendezvousHello> parsed =
            parse_hello_body(std::span<const uint8_t>(hello).subspan(kRendezvousHeaderBytes));
        EXPECT_TRUE(parsed.ok()) << parsed.status();
        // Signed with a key the fake holds, which is not the job's.
        return encode_reply(kOtherJobKey, challenge, parsed.ok() ? parsed->nonce : RendezvousNonce{},
                            {.accepted = true, .data = std::vector<uint8_t>(128, 0xEE)});
      });
  EXPECT_NE(status.message().find("its reply does not authenticate"), std::string::npos) << status;
}

TEST(TcpRendezvousHostile, FakeRankZeroSpeakingGarbageIsNamed) {
  Listener fake;
  std::future<absl::StatusOr<std::vector<uint8_t>>> rank1 =
      std::async(std::launch::async, [&] { return tcp_rendezvous(options_for(fake.port, 1), {}); });
  const int connection = ::accept(fake.fd, nullptr, nullptr);
  ASSERT_GE(connection, 0);
  const std::string banner = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n";
  ::send(connection, banner.data(), banner.size(), MSG_NOSIGNAL);
  absl::StatusOr<std::vector<uint8_t>> result = rank1.get();
  ::close(connection);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("rank 0's challenge: it does not speak the nanoforge rendezvous"),
            std::string::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("is another program listening on MASTER_PORT?"), std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace nanoforge
