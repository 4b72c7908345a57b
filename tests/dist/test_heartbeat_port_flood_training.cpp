// `nanoforge train` on 2 emulated GPUs, torchrun-style (ranks as processes, tests/dist/rank_processes.h),
// while this process floods rank 0's heartbeat port — found as rank 0's listening socket on every interface
// that is not MASTER_PORT — with idle and garbage connections, and each rank may open only 128 descriptors
// (set for the ranks alone: 200 connections then do what ~1,100 do against the common 1024): nothing on that
// port may keep a rank out, make one exit or cost a checkpoint. Emulation builds only (the NCCL engine on the
// emulator); ~10 s on 2 cores.
#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/dist/connection_flood.h"
#include "tests/dist/rank_processes.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;

constexpr int kSteps = 2;
constexpr int kCheckpointEvery = 1;
constexpr int kRankDescriptors = 128;  // each rank's RLIMIT_NOFILE: the flood alone would exceed it
constexpr int kIdleConnections = 150;
constexpr int kGarbageConnections = 50;
// The whole launch: a hang fails the test instead of stalling ctest.
constexpr double kHardLimitSeconds = 120;

// The child of this process whose environment says RANK=0 (once it runs the program), or -1. run_processes
// forks the ranks from this process's main thread, so they are that thread's children.
pid_t rank_zero_process() {
  const std::string main_thread = std::to_string(::getpid());
  std::istringstream children(read_bytes("/proc/" + main_thread + "/task/" + main_thread + "/children"));
  for (pid_t child = 0; children >> child;) {
    const std::string environment = read_bytes("/proc/" + std::to_string(child) + "/environ");
    if (environment.find(std::string("\0RANK=0\0", 8)) != std::string::npos ||
        environment.starts_with(std::string("RANK=0\0", 7)))
      return child;
  }
  return -1;
}

// The port of `pid`'s TCP listener on every interface (::) other than `master_port`, or 0.
int heartbeat_port_of(pid_t pid, int master_port) {
  std::set<std::string> sockets;  // "socket:[inode]" -> inode
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error)) {
    const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
    if (target.starts_with("socket:[")) sockets.insert(target.substr(8, target.size() - 9));
  }
  std::istringstream table(read_bytes("/proc/" + std::to_string(pid) + "/net/tcp6"));
  std::string line;
  std::getline(table, line);  // the column names
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "0A" || !sockets.count(inode)) continue;  // 0A: LISTEN
    if (local.substr(0, 32) != std::string(32, '0')) continue;
    const int port = std::stoi(local.substr(33), nullptr, 16);
    if (port != master_port) return port;
  }
  return 0;
}

std::string latest_checkpoint_name(const std::string& run) {
  std::string name = read_bytes(run + "/checkpoints/latest");
  while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
    name.pop_back();
  return name;
}

struct FloodedRun {
  std::string run;
  std::vector<RankRun> ranks;
  int heartbeat_port = 0;
  int64_t replaced = 0;
  int most_descriptors = 0;  // rank 0's, during the flood
};

// Trains kSteps steps on 2 ranks, a checkpoint after each, while 200 connections (150 idle, 50 sending
// garbage) are held against rank 0's heartbeat port, each replaced once rank 0 closes it (ConnectionFlood):
// from the moment rank 0 listens (before the rendezvous: rank 1 connects to the port under the flood) to the
// end of the run.
FloodedRun train_flooded(const std::string& name) {
  ConnectionFlood::allow_descriptors(1024);
  const std::string dir = temp_dir(name);
  FloodedRun flooded;
  flooded.run = dir + "/run";
  Recipe recipe = small_recipe();
  recipe.train.device = "cuda";
  recipe.train.horizon.num_iterations = kSteps;
  recipe.train.schedule.warmup_steps = 1;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = kCheckpointEvery;
  recipe.dist.timeout_seconds = 10;
  const std::string recipe_path = recipe_file(recipe, dir);
  const std::vector<std::string> command = {
      "/bin/sh",
      "-c",
      "ulimit -n " + std::to_string(kRankDescriptors) + " && exec \"$0\" \"$@\"",
      gpu_nanoforge_binary(),
      "train",
      "--recipe",
      recipe_path,
      "--run-dir",
      flooded.run};
  const int port = free_port();
  std::atomic<bool> running{true};
  std::thread attacker([&] {
    pid_t rank0 = -1;
    while (running.load() && flooded.heartbeat_port == 0) {
      rank0 = rank_zero_process();
      if (rank0 > 0) flooded.heartbeat_port = heartbeat_port_of(rank0, port);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!running.load()) return;
    ConnectionFlood flood(flooded.heartbeat_port, kIdleConnections, kGarbageConnections);
    flood.sustain([&] {
      flooded.most_descriptors = std::max(flooded.most_descriptors, open_descriptors(rank0));
      return running.load();
    });
    flooded.replaced = flood.replaced();
  });
  std::vector<std::vector<std::string>> environments;
  for (int rank = 0; rank < 2; ++rank) {
    environments.push_back(torchrun_environment(rank, 2, port));
    environments.back().push_back("NANOFORGE_EMULATOR=devices=2");
  }
  flooded.ranks = run_processes(environments, command, -1, kHardLimitSeconds);
  running.store(false);
  attacker.join();
  std::printf(
      "flooded rank 0's heartbeat port %d: rank 0 held at most %d descriptors (of %d) meanwhile and "
      "closed %lld connections, each replaced\n",
      flooded.heartbeat_port, flooded.most_descriptors, kRankDescriptors,
      static_cast<long long>(flooded.replaced));
  return flooded;
}

// Both ranks trained to the end and exited 0, and every checkpoint was written.
void expect_the_whole_run(const FloodedRun& flooded) {
  ASSERT_NE(flooded.heartbeat_port, 0) << "the test did not find rank 0's heartbeat port\n"
                                       << describe(flooded.ranks);
  bool finished = true;
  for (const RankRun& rank : flooded.ranks)
    finished = finished && rank.exited && rank.exit_code == 0;
  EXPECT_TRUE(finished) << describe(flooded.ranks);
  EXPECT_LT(flooded.most_descriptors, kRankDescriptors) << "the flood exhausted rank 0's descriptors";
  EXPECT_EQ(latest_checkpoint_name(flooded.run), fmt::format("step_{:06d}", kSteps));
  for (int step = kCheckpointEvery; step <= kSteps; step += kCheckpointEvery)
    EXPECT_TRUE(fs::exists(fmt::format("{}/checkpoints/step_{:06d}/model.h5", flooded.run, step)))
        << "no checkpoint of step " << step;
  EXPECT_EQ(losses_by_step(flooded.run).size(), static_cast<size_t>(kSteps));
}

// The attack, from before the ranks connect to the port to the end of the run.
TEST(HeartbeatPortFlood, TheRanksStillConnectTrainToTheEndAndWriteEveryCheckpoint) {
  expect_the_whole_run(train_flooded("heartbeat_flood"));
}

}  // namespace
}  // namespace nanoforge
