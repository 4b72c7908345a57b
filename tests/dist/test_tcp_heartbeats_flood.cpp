// Rank 0's heartbeat port (dist/tcp_heartbeats.h) flooded on the loopback: ranks 0 and 1 in child
// processes, rank 0 with few file descriptors (RLIMIT_NOFILE 128), while this process floods the port with
// idle and garbage connections, opening a new one for each that rank 0 closes — rank 0 must hold only a
// bounded number of them, still open files (a checkpoint), and both ranks must keep hearing each other.
// The single hostile connections are test_tcp_heartbeats_hostile.cpp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_heartbeats.h"
#include "tests/dist/connection_flood.h"

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kSecret = "the heartbeat port test's secret";
// Rank 0's descriptors: a few hundred connections would exhaust them, as ~1,100 exhaust the common 1024.
constexpr rlim_t kRankZeroDescriptors = 128;
constexpr int kIdleConnections = 150;
constexpr int kGarbageConnections = 50;
// Unauthenticated connections rank 0 may hold at once once every rank is in (docs/distributed.md), plus the
// one it has just accepted before closing the oldest.
constexpr int kMostWaiting = 16 + 1;
// Every wait for a child's answer gives up after this long, so that a bug fails the test instead of hanging
// it (not a timing threshold: each answer should take milliseconds).
constexpr double kHangGuardSeconds = 30;

// A rank in a child process, driven by one-byte commands over a pipe and answering in lines over another.
class RankProcess {
 public:
  explicit RankProcess(const std::function<void(int commands, int answers)>& body) {
    int commands[2];
    int answers[2];
    EXPECT_EQ(::pipe(commands), 0);
    EXPECT_EQ(::pipe(answers), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(commands[1]);
      ::close(answers[0]);
      body(commands[0], answers[1]);
      ::_exit(0);
    }
    ::close(commands[0]);
    ::close(answers[1]);
    commands_ = commands[1];
    answers_ = answers[0];
  }
  ~RankProcess() {
    ::close(commands_);  // end of file: the child's loop ends
    if (!waited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(answers_);
  }
  pid_t pid() const { return pid_; }
  void command(char what) { EXPECT_EQ(::write(commands_, &what, 1), 1); }
  // The child's next `count` bytes, fewer when none came within the hang guard.
  std::string read_bytes(size_t count) {
    std::string bytes;
    const auto give_up = Clock::now() + std::chrono::duration<double>(kHangGuardSeconds);
    while (bytes.size() < count && Clock::now() < give_up) {
      pollfd entry{answers_, POLLIN, 0};
      if (::poll(&entry, 1, 100) <= 0) continue;
      char c = 0;
      if (::read(answers_, &c, 1) != 1) break;
      bytes += c;
    }
    return bytes;
  }
  // The child's next line, or "" when none came within the hang guard.
  std::string answer() {
    std::string line;
    const auto give_up = Clock::now() + std::chrono::duration<double>(kHangGuardSeconds);
    while (Clock::now() < give_up) {
      pollfd entry{answers_, POLLIN, 0};
      if (::poll(&entry, 1, 100) <= 0) continue;
      char c = 0;
      if (::read(answers_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }
  // The child's exit status once it has exited, -1 if it did not within the hang guard.
  int wait_for_exit() {
    const auto give_up = Clock::now() + std::chrono::duration<double>(kHangGuardSeconds);
    while (Clock::now() < give_up) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        waited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int commands_ = -1;
  int answers_ = -1;
  bool waited_ = false;
};

void say(int fd, const std::string& line) {
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
}

// What a trainer does to save a checkpoint, in small: create a file, write it, sync it, rename it.
std::string save_checkpoint(const std::string& dir) {
  const std::string path = dir + "/model.h5.partial";
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("checkpoint failed: ") + std::strerror(errno);
  const std::string bytes(4096, 'w');
  const bool written =
      ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || std::rename(path.c_str(), (dir + "/model.h5").c_str()) != 0)
    return std::string("checkpoint failed: ") + std::strerror(errno);
  return "checkpoint saved";
}

// A rank's heartbeat loop: announces collective #s and polls every 10 ms, answering commands meanwhile:
// 'c' saves a checkpoint into `dir`, 'd' says whether every peer is still heard (within 1 s), 'q' (or the end
// of the commands) stops it.
void heartbeat_loop(Heartbeats& channel, int commands, int answers, const std::string& dir) {
  ::fcntl(commands, F_SETFL, O_NONBLOCK);
  for (uint64_t sequence = 0;; ++sequence) {
    channel.announce(sequence);
    channel.poll(sequence);
    char command = 0;
    const ssize_t got = ::read(commands, &command, 1);
    if (got == 0 || (got == 1 && command == 'q')) return;
    if (got == 1 && command == 'c') say(answers, save_checkpoint(dir));
    if (got == 1 && command == 'd') say(answers, channel.describe_missing(0, 1.0));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The attack on a 2-rank job, at a smaller scale: rank 0 runs with 128 descriptors, and 200
// connections (150 idle, 50 sending garbage) are held against its heartbeat port for 2 s, each replaced as
// soon as rank 0 closes it. Rank 0 must hold no more than the bounded few unauthenticated connections, save a
// checkpoint meanwhile, and both ranks must still hear each other.
TEST(TcpHeartbeatPort, FloodOfIdleAndGarbageConnectionsCostsNeitherDescriptorsNorHeartbeats) {
  // A child that died fails the test by its answers, not this process by a signal.
  ::signal(SIGPIPE, SIG_IGN);
  test::ConnectionFlood::allow_descriptors(1024);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("nanoforge_heartbeat_flood_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RankProcess rank0([&](int commands, int answers) {
    ::setenv("NANOFORGE_RENDEZVOUS_SECRET", kSecret, 1);  // the job's key, as a launch script sets it
    const rlimit limit{kRankZeroDescriptors, kRankZeroDescriptors};
    ::setrlimit(RLIMIT_NOFILE, &limit);
    TcpHeartbeatAddress address;
    absl::StatusOr<std::unique_ptr<TcpHeartbeats>> channel = TcpHeartbeats::listen(2, &address);
    if (!channel.ok()) {
      say(answers, std::string(channel.status().message()));
      return;
    }
    (void)!::write(answers, &address, sizeof(address));
    heartbeat_loop(**channel, commands, answers, dir);
  });
  // Rank 0's first answer: its address, as the rendezvous would carry it.
  TcpHeartbeatAddress address;
  const std::string raw = rank0.read_bytes(sizeof(address));
  ASSERT_EQ(raw.size(), sizeof(address)) << "rank 0 did not listen: " << raw;
  std::memcpy(&address, raw.data(), sizeof(address));

  RankProcess rank1([&](int commands, int answers) {
    ::setenv("NANOFORGE_RENDEZVOUS_SECRET", kSecret, 1);
    absl::StatusOr<std::unique_ptr<TcpHeartbeats>> channel =
        TcpHeartbeats::connect("127.0.0.1", address, 1, 2, kHangGuardSeconds);
    say(answers, channel.ok() ? "connected" : std::string(channel.status().message()));
    if (channel.ok()) heartbeat_loop(**channel, commands, answers, dir);
  });
  ASSERT_EQ(rank1.answer(), "connected");
  // Both have heard each other once the tables flow.
  const auto give_up = Clock::now() + std::chrono::duration<double>(kHangGuardSeconds);
  std::string rank0_view;
  do {
    rank0.command('d');
    rank0_view = rank0.answer();
  } while (rank0_view.find("still answering") == std::string::npos && Clock::now() < give_up);
  ASSERT_NE(rank0_view.find("still answering"), std::string::npos) << rank0_view;
  const int before = test::open_descriptors(rank0.pid());

  // Under the flood, after 1 s: rank 0 saves its checkpoint, and each rank says whether it hears the other.
  int most = before;
  bool asked = false;
  test::ConnectionFlood flood(address.port, kIdleConnections, kGarbageConnections);
  const auto start = Clock::now();
  flood.sustain([&] {
    most = std::max(most, test::open_descriptors(rank0.pid()));
    if (!asked && Clock::now() - start > std::chrono::seconds(1)) {
      rank0.command('c');
      rank0.command('d');
      rank1.command('d');
      asked = true;
    }
    return Clock::now() - start < std::chrono::seconds(2);
  });
  const std::string saved = rank0.answer();
  rank0_view = rank0.answer();
  const std::string rank1_view = rank1.answer();
  std::printf(
      "rank 0 held %d descriptors before the flood, at most %d during it; %lld connections closed by "
      "rank 0 were replaced\n",
      before, most, static_cast<long long>(flood.replaced()));

  EXPECT_EQ(saved, "checkpoint saved");
  // The bound, and the checkpoint's file while it is written.
  EXPECT_LE(most, before + kMostWaiting + 1) << "rank 0 holds unauthenticated connections without a bound";
  EXPECT_NE(rank0_view.find("still answering"), std::string::npos) << "rank 0: " << rank0_view;
  EXPECT_NE(rank1_view.find("still answering"), std::string::npos) << "rank 1: " << rank1_view;
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.h5"));
  rank1.command('q');
  rank0.command('q');
  EXPECT_EQ(rank1.wait_for_exit(), 0);
  EXPECT_EQ(rank0.wait_for_exit(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nanoforge
