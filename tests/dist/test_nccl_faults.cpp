// What the survivors of a lost rank do on the NCCL engine, on emulated GPUs (the emulator's nccl_fault=
// setting, emulator.h): ranks started torchrun-style as separate processes (RANK, WORLD_SIZE, MASTER_ADDR,
// the TCP rendezvous, heartbeats over TCP) run tests/dist/nccl_fault_worker.cpp; one of them dies, stalls or
// fails at connection setup, in its k-th collective or at teardown, and every survivor must exit with
// status 75 within the timeout (2 s) plus the watchdog's grace (5 s), naming the lost rank; a hang hits each
// run's hard limit (40 s). And the torchrun-style launch must compute what an mpirun launch computes.
// docs/distributed.md ("When a rank dies") has the measured times and why the bound is this one.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/dist/rank_processes.h"
#include "tests/test_paths.h"

namespace nanoforge {
namespace {

using test::describe;
using test::names_rank;
using test::RankRun;

constexpr double kTimeoutSeconds = 2;
constexpr double kGraceSeconds = 5;  // the watchdog's exit grace for timeouts under 5 s (comm_watchdog.cpp)
constexpr double kHardLimitSeconds = 40;

std::string worker_path() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "nccl_fault_worker").string();
}

// `world` ranks started torchrun-style on emulated GPUs, rank `fault`'s failure injected (empty: none).
std::vector<RankRun> run_torchrun_style(int world, const std::string& fault, double timeout_seconds,
                                        int steps = 3) {
  const int victim = fault.empty() ? -1 : std::atoi(fault.c_str());
  const int port = test::free_port();
  std::string emulator = "NANOFORGE_EMULATOR=devices=" + std::to_string(world);
  if (!fault.empty()) emulator += " nccl_fault=" + fault;
  std::vector<std::vector<std::string>> environments;
  for (int rank = 0; rank < world; ++rank) {
    environments.push_back(test::torchrun_environment(rank, world, port));
    environments.back().push_back(emulator);
  }
  return test::run_processes(environments,
                             {worker_path(), std::to_string(timeout_seconds), std::to_string(steps), "3000"},
                             victim, kHardLimitSeconds);
}

// Every rank but `lost` exited with status 75 within `limit_seconds`, naming `lost`.
void expect_survivors_fail(const std::vector<RankRun>& runs, int lost, double limit_seconds) {
  for (int rank = 0; rank < static_cast<int>(runs.size()); ++rank) {
    if (rank == lost) continue;
    const RankRun& run = runs[static_cast<size_t>(rank)];
    EXPECT_TRUE(run.exited) << "rank " << rank << " hung\n" << describe(runs);
    EXPECT_EQ(run.exit_code, 75) << "rank " << rank << "\n" << describe(runs);
    EXPECT_LE(run.seconds, limit_seconds) << "rank " << rank << "\n" << describe(runs);
    EXPECT_TRUE(names_rank(run.output, lost)) << "rank " << rank << " does not name rank " << lost << "\n"
                                              << describe(runs);
    std::printf("rank %d of %zu exited with %d after %.2f s\n", rank, runs.size(), run.exit_code,
                run.seconds);
    if (std::getenv("NANOFORGE_SHOW_FAULT_OUTPUT") != nullptr) std::printf("%s", run.output.c_str());
  }
}

TEST(NcclFaults, PeerLostDuringConnectionSetupIsAnErrorNotAHang) {
  for (const int world : {2, 4}) {
    SCOPED_TRACE(world);
    const std::vector<RankRun> runs = run_torchrun_style(world, "1:die@connect", kTimeoutSeconds);
    expect_survivors_fail(runs, 1, kTimeoutSeconds + kGraceSeconds);
  }
}

TEST(NcclFaults, PeerStallsInKthAllReduce) {
  // Collective #3 is the all-reduce of the second step; the stalled rank is frozen (SIGSTOP), heartbeats
  // and all, as a machine that hangs.
  const std::vector<RankRun> runs = run_torchrun_style(2, "1:stall@collective-3", kTimeoutSeconds);
  expect_survivors_fail(runs, 1, kTimeoutSeconds + kGraceSeconds);
  EXPECT_GE(runs[0].seconds, kTimeoutSeconds) << "rank 0 failed before the timeout\n" << describe(runs);
}

TEST(NcclFaults, DestroyAfterPeerLostReturns) {
  // Every collective completes; then rank 1 freezes in teardown (or dies there) and rank 0's teardown must
  // end within the timeout instead of waiting for it forever.
  for (const std::string fault : {"1:stall@destroy", "1:die@destroy"}) {
    SCOPED_TRACE(fault);
    const std::vector<RankRun> runs = run_torchrun_style(2, fault, kTimeoutSeconds);
    expect_survivors_fail(runs, 1, kTimeoutSeconds + kGraceSeconds);
    EXPECT_NE(runs[0].output.find("checksum"), std::string::npos) << "rank 0 did not finish its steps\n"
                                                                  << describe(runs);
    EXPECT_NE(runs[0].output.find("NCCL teardown"), std::string::npos) << describe(runs);
  }
}

TEST(NcclFaults, AsyncErrorFailsTheCommunicator) {
  // A long timeout: the error must fail the communicator at once, not when a collective times out.
  constexpr double kLongTimeoutSeconds = 30;
  const std::vector<RankRun> runs = run_torchrun_style(2, "1:error@collective-2", kLongTimeoutSeconds);
  for (int rank = 0; rank < 2; ++rank) {
    const RankRun& run = runs[static_cast<size_t>(rank)];
    EXPECT_TRUE(run.exited) << describe(runs);
    EXPECT_EQ(run.exit_code, 75) << "rank " << rank << "\n" << describe(runs);
    EXPECT_LT(run.seconds, kLongTimeoutSeconds / 2) << "rank " << rank << "\n" << describe(runs);
    std::printf("rank %d exited with %d after %.2f s\n", rank, run.exit_code, run.seconds);
  }
  EXPECT_NE(runs[1].output.find("NCCL reported an asynchronous error"), std::string::npos) << describe(runs);
  EXPECT_TRUE(names_rank(runs[0].output, 1)) << describe(runs);
}

std::string checksum_of(const std::string& output) {
  std::smatch found;
  return std::regex_search(output, found, std::regex("checksum ([0-9a-f]{16})")) ? found[1].str() : "";
}

TEST(NcclLaunch, TorchrunStyleComputesWhatMpirunComputes) {
  const std::vector<RankRun> torchrun = run_torchrun_style(2, "", 60, 4);
  ASSERT_TRUE(torchrun[0].exited && torchrun[1].exited) << describe(torchrun);
  ASSERT_EQ(torchrun[0].exit_code, 0) << describe(torchrun);
  ASSERT_EQ(torchrun[1].exit_code, 0) << describe(torchrun);
  const std::vector<RankRun> mpirun =
      test::run_processes({{"NANOFORGE_EMULATOR=devices=2", "OMPI_MCA_rmaps_base_oversubscribe=1"}},
                          {test::mpiexec(), "-np", "2", "--oversubscribe", worker_path(), "60", "4", "3000"},
                          -1, kHardLimitSeconds);
  ASSERT_TRUE(mpirun[0].exited) << describe(mpirun);
  ASSERT_EQ(mpirun[0].exit_code, 0) << describe(mpirun);
  const std::string expected = checksum_of(torchrun[0].output);
  ASSERT_FALSE(expected.empty()) << describe(torchrun);
  EXPECT_EQ(checksum_of(mpirun[0].output), expected) << describe(mpirun);
}

}  // namespace
}  // namespace nanoforge
