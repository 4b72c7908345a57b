// The TCP rendezvous between forked processes on localhost: 2 and 4 ranks receive rank 0's payload whoever
// starts first; a missing rank, a missing rank 0, a wrong WORLD_SIZE and a duplicated RANK each fail within
// the timeout with an error that says so.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_rendezvous.h"

namespace nanoforge {
namespace {

// A port that was free a moment ago (the kernel picks it; the rendezvous binds it again right after).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::vector<uint8_t> test_payload() {
  std::vector<uint8_t> payload(128);  // the size of an ncclUniqueId
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<uint8_t>(i * 37 + 11);
  return payload;
}

struct Outcome {
  bool ok = false;
  std::string text;  // the payload's check or the error
};

// Runs tcp_rendezvous for `options` in a child process (after `delay`), reporting back through a pipe.
struct Child {
  pid_t pid = -1;
  int read_fd = -1;
};

Child start_rank(const RendezvousOptions& options, std::chrono::milliseconds delay) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::this_thread::sleep_for(delay);
    const std::vector<uint8_t> payload = test_payload();
    absl::StatusOr<std::vector<uint8_t>> got = tcp_rendezvous(
        options, options.rank == 0 ? std::span<const uint8_t>(payload) : std::span<const uint8_t>());
    const std::string report = got.ok() ? (*got == payload ? "OK payload matches" : "OK payload differs")
                                        : "ERROR " + std::string(got.status().message());
    (void)!::write(fds[1], report.data(), report.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

Outcome finish(const Child& child) {
  std::string text;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = ::read(child.read_fd, buffer, sizeof(buffer))) > 0)
    text.append(buffer, static_cast<size_t>(got));
  ::close(child.read_fd);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  return {text.rfind("OK", 0) == 0, text};
}

RendezvousOptions options_for(int port, int rank, int world_size, double timeout_seconds = 20) {
  return {.master_addr = "127.0.0.1",
          .master_port = port,
          .rank = rank,
          .world_size = world_size,
          .timeout_seconds = timeout_seconds,
          .key = rendezvous_key_from_secret("this job's secret, 32 bytes long", "the test's secret"),
          .hello_timeout_seconds = 10,
          .on_refused = {}};
}

void check_everyone_gets_the_payload(int world_size, bool rank0_last) {
  const int port = free_port();
  std::vector<Child> children;
  for (int rank = 0; rank < world_size; ++rank) {
    // Ranks that start before rank 0 listens keep retrying their connection.
    const bool late = (rank == 0) == rank0_last;
    children.push_back(
        start_rank(options_for(port, rank, world_size), std::chrono::milliseconds(late ? 300 : 0)));
  }
  for (int rank = 0; rank < world_size; ++rank) {
    const Outcome outcome = finish(children[static_cast<size_t>(rank)]);
    EXPECT_EQ(outcome.text, "OK payload matches") << "rank " << rank;
  }
}

TEST(TcpRendezvous, TwoRanks) {
  check_everyone_gets_the_payload(2, /*rank0_last=*/false);
}

TEST(TcpRendezvous, FourRanksWithRankZeroStartingLast) {
  check_everyone_gets_the_payload(4, /*rank0_last=*/true);
}

TEST(TcpRendezvous, WorldOfOneNeedsNoNetwork) {
  const std::vector<uint8_t> payload = test_payload();
  absl::StatusOr<std::vector<uint8_t>> got = tcp_rendezvous(options_for(1, 0, 1), payload);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, payload);
}

TEST(TcpRendezvous, RankZeroNamesTheRanksThatNeverCame) {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  Child rank0 = start_rank(options_for(port, 0, 4, /*timeout_seconds=*/1.5), std::chrono::milliseconds(0));
  // Rank 2 would wait longer: it hears rank 0's verdict instead of timing out itself.
  Child rank2 = start_rank(options_for(port, 2, 4, 10), std::chrono::milliseconds(0));
  const Outcome outcome0 = finish(rank0);
  const Outcome outcome2 = finish(rank2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(outcome0.ok);
  EXPECT_NE(outcome0.text.find("ranks 1, 3 did not connect"), std::string::npos) << outcome0.text;
  EXPECT_NE(outcome0.text.find("(2 of 4 arrived)"), std::string::npos) << outcome0.text;
  // Rank 2 learns from rank 0 why the rendezvous failed.
  EXPECT_FALSE(outcome2.ok);
  EXPECT_NE(outcome2.text.find("rank 0 refused: rendezvous: ranks 1, 3 did not connect"), std::string::npos)
      << outcome2.text;
  EXPECT_LT(seconds, 6);
}

TEST(TcpRendezvous, PeerGivesUpWithoutRankZero) {
  const int port = free_port();
  const Outcome outcome = finish(start_rank(options_for(port, 1, 2, 1.0), std::chrono::milliseconds(0)));
  EXPECT_FALSE(outcome.ok);
  EXPECT_NE(outcome.text.find("rank 1 could not connect to rank 0 at 127.0.0.1:" + std::to_string(port) +
                              " within 1 s"),
            std::string::npos)
      << outcome.text;
}

TEST(TcpRendezvous, MismatchedWorldSizeIsRefused) {
  const int port = free_port();
  Child rank0 = start_rank(options_for(port, 0, 2, 5), std::chrono::milliseconds(0));
  Child rank1 = start_rank(options_for(port, 1, 3, 5), std::chrono::milliseconds(100));
  const Outcome outcome0 = finish(rank0);
  const Outcome outcome1 = finish(rank1);
  EXPECT_NE(outcome0.text.find("was started with WORLD_SIZE=3 but rank 0 with WORLD_SIZE=2"),
            std::string::npos)
      << outcome0.text;
  EXPECT_NE(outcome1.text.find("rank 0 refused"), std::string::npos) << outcome1.text;
}

TEST(TcpRendezvous, DuplicatedRankIsRefused) {
  const int port = free_port();
  Child rank0 = start_rank(options_for(port, 0, 3, 5), std::chrono::milliseconds(0));
  Child first = start_rank(options_for(port, 1, 3, 5), std::chrono::milliseconds(50));
  Child second = start_rank(options_for(port, 1, 3, 5), std::chrono::milliseconds(300));
  const Outcome outcome0 = finish(rank0);
  finish(first);
  finish(second);
  EXPECT_NE(outcome0.text.find("two processes say they are rank 1, at 127.0.0.1:"), std::string::npos)
      << outcome0.text;
}

}  // namespace
}  // namespace nanoforge
