// `nanoforge train` on 2 emulated GPUs over NCCL, each rank its own process (tests/dist/rank_processes.h):
// a torchrun-style launch trains exactly what an mpirun launch trains; and a rank SIGKILLed in the middle of
// a step makes the survivor exit with status 75 (kCommFailureExitCode, what a restart script resumes on),
// naming the lost rank, after which `train --resume` on one rank continues from the last checkpoint to the
// end. Emulation builds only: the kill is the emulator's nccl_fault= injection. ~10 s in all on 2 cores.
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/dist/rank_processes.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;

constexpr double kTimeoutSeconds = 2;  // dist.timeout_seconds of these runs
constexpr double kGraceSeconds = 5;    // the watchdog's exit grace for timeouts under 5 s (comm_watchdog.cpp)
constexpr double kHardLimitSeconds = 60;  // per launch: a hang fails the test instead of stalling ctest

// The fixture's one-layer model on the GPU for `steps` steps of 2 micro-batches of 4 x 64 tokens (one per
// rank on 2 ranks), no evaluation or samples. The emulator runs one schedule per launch (its default).
std::string write_recipe(const std::string& dir, int64_t steps, int64_t checkpoint_every) {
  Recipe recipe = small_recipe();
  recipe.train.device = "cuda";
  recipe.train.horizon.num_iterations = steps;
  recipe.train.schedule.warmup_steps = 1;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = checkpoint_every;
  recipe.dist.timeout_seconds = kTimeoutSeconds;
  return recipe_file(recipe, dir);
}

std::vector<std::string> train_command(const std::string& recipe, const std::string& run) {
  return {gpu_nanoforge_binary(), "train", "--recipe", recipe, "--run-dir", run};
}

// Two ranks started torchrun-style, `emulator` as each one's NANOFORGE_EMULATOR.
std::vector<RankRun> train_torchrun_style(const std::vector<std::string>& command,
                                          const std::string& emulator, int victim) {
  const int port = free_port();
  std::vector<std::vector<std::string>> environments;
  for (int rank = 0; rank < 2; ++rank) {
    environments.push_back(torchrun_environment(rank, 2, port));
    environments.back().push_back("NANOFORGE_EMULATOR=" + emulator);
  }
  return run_processes(environments, command, victim, kHardLimitSeconds);
}

std::string latest_checkpoint_name(const std::string& run) {
  std::string name = read_bytes(run + "/checkpoints/latest");
  while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
    name.pop_back();
  return name;
}

// The same ranks, seed, data rows, kernels and collectives in the same order: a launcher only decides how
// the ranks find each other and share NCCL's unique id (MPI's broadcast, or the TCP rendezvous), never what
// they compute, and the emulated NCCL reduces in a fixed ring order whoever bootstrapped it. So every loss
// (as metrics.jsonl records it) and every final weight must be equal bit for bit: any difference is the
// launch leaking into the numbers (a wrong world size, rank or accumulation count). A tolerance would hide
// exactly that. (Bitwise holds on the emulator; on GPUs it also needs NCCL to pick the same algorithm.)
TEST(NcclLaunch, TorchrunStyleTrainsLikeMpirun) {
  const std::string dir = temp_dir("nccl_launch");
  const std::string recipe = write_recipe(dir, 4, -1);
  const std::vector<RankRun> torchrun =
      train_torchrun_style(train_command(recipe, dir + "/torchrun"), "devices=2", -1);
  for (const RankRun& rank : torchrun)
    ASSERT_EQ(rank.exit_code, 0) << describe(torchrun);
  std::vector<std::string> mpirun_command = {mpiexec(), "-np", "2", "--oversubscribe"};
  for (const std::string& argument : train_command(recipe, dir + "/mpirun"))
    mpirun_command.push_back(argument);
  const std::vector<RankRun> mpirun =
      run_processes({{"NANOFORGE_EMULATOR=devices=2", "OMPI_MCA_rmaps_base_oversubscribe=1"}}, mpirun_command,
                    -1, kHardLimitSeconds);
  ASSERT_EQ(mpirun[0].exit_code, 0) << describe(mpirun);
  // Both trained as one 2-rank NCCL job (not as two separate one-rank runs).
  EXPECT_NE(torchrun[0].output.find("dist: 2 ranks (nccl)"), std::string::npos) << describe(torchrun);
  EXPECT_NE(mpirun[0].output.find("dist: 2 ranks (nccl)"), std::string::npos) << describe(mpirun);

  const std::map<int64_t, std::string> losses = losses_by_step(dir + "/torchrun");
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_EQ(losses_by_step(dir + "/mpirun"), losses);
  EXPECT_TRUE(final_weights(dir + "/mpirun") == final_weights(dir + "/torchrun"))
      << "the final weights differ between the launches";
}

// Rank 1 SIGKILLs itself at its 71st collective (#70): in the middle of step 4's gradient reduction (a step
// of this recipe is about 20 collectives: buckets reduce-scattered and all-gathered, the scalars, the votes;
// the asserts on the logged steps and on `latest` say so if a change moves it), after the checkpoint of step
// 2. Timing: the survivor must exit within the timeout plus the grace after rank 1's death, the deadline
// the code keeps even when nothing tells it the peer is gone; it measures ~0.5 s (the dead rank's closed
// connection fails the communicator at the watchdog's next tick), so 6.5 s are left for a loaded 2-core
// machine. Torchrun-style, so that the test sees the survivor's own exit status (mpirun would end it).
TEST(NcclTraining, RankKilledMidStepSurvivorExits75AndTheCheckpointResumesOnOneRank) {
  const std::string dir = temp_dir("nccl_rank_killed");
  const std::string run = dir + "/run";
  const std::string recipe = write_recipe(dir, 6, 2);
  const std::vector<RankRun> ranks =
      train_torchrun_style(train_command(recipe, run), "devices=2 nccl_fault=1:die@collective-70", 1);
  const RankRun& survivor = ranks[0];
  ASSERT_EQ(ranks[1].signal, SIGKILL) << "rank 1 was not killed\n" << describe(ranks);
  ASSERT_TRUE(survivor.exited) << "rank 0 hung\n" << describe(ranks);
  EXPECT_EQ(survivor.exit_code, 75) << describe(ranks);
  EXPECT_LE(survivor.seconds - ranks[1].seconds, kTimeoutSeconds + kGraceSeconds) << describe(ranks);
  EXPECT_TRUE(names_rank(survivor.output, 1)) << "rank 0 does not name rank 1\n" << describe(ranks);
  std::printf("rank 0 exited with %d %.2f s after rank 1 was killed (%.2f s after the start)\n",
              survivor.exit_code, survivor.seconds - ranks[1].seconds, survivor.seconds);
  // Killed inside step 4: step 3 was logged, step 4 never was, and step 2's checkpoint is the latest.
  const std::map<int64_t, std::string> killed_losses = losses_by_step(run);
  ASSERT_EQ(killed_losses.size(), 3u) << describe(ranks);
  ASSERT_EQ(latest_checkpoint_name(run), "step_000002") << describe(ranks);

  // One rank, no launcher: the single engine resumes the 2-rank checkpoint (a killed holder's run.lock is
  // taken over; this survivor released it on its way out).
  std::vector<std::string> resume_command = train_command(recipe, run);
  resume_command.push_back("--resume");
  const std::vector<RankRun> resumed =
      run_processes({{"NANOFORGE_EMULATOR=devices=1"}}, resume_command, -1, kHardLimitSeconds);
  ASSERT_EQ(resumed[0].exit_code, 0) << describe(resumed);
  EXPECT_NE(resumed[0].output.find("step_000002 at step 2"), std::string::npos) << describe(resumed);
  EXPECT_NE(resumed[0].output.find("done: step 6 of 6"), std::string::npos) << describe(resumed);
  const std::map<int64_t, std::string> losses = losses_by_step(run);
  ASSERT_EQ(losses.size(), 6u);
  // Step 3's loss is the forward of step 2's weights (restored exactly) on the same rows: one rank and two
  // differ only in the order the micro-batch losses are added, a few f32 ulps (~5e-7 each here); a resume
  // from anything but step 2's state is off by about the loss's descent per step (0.3 to 0.6 here).
  EXPECT_NEAR(std::stod(losses.at(3)), std::stod(killed_losses.at(3)), 1e-5);
}

// A rank lost at the first collective of the training loop (the stop vote before step 1, collective #1):
// the vote's error must reach the program's exit as 75, not end it in an internal check (SIGABRT).
TEST(NcclTraining, RankLostAtTheFirstStopVoteSurvivorExits75) {
  const std::string dir = temp_dir("nccl_rank_lost_at_vote");
  const std::vector<RankRun> ranks = train_torchrun_style(
      train_command(write_recipe(dir, 4, -1), dir + "/run"), "devices=2 nccl_fault=1:die@collective-1", 1);
  ASSERT_EQ(ranks[1].signal, SIGKILL) << describe(ranks);
  ASSERT_TRUE(ranks[0].exited) << describe(ranks);
  EXPECT_EQ(ranks[0].exit_code, 75) << describe(ranks);
  EXPECT_LE(ranks[0].seconds - ranks[1].seconds, kTimeoutSeconds + kGraceSeconds) << describe(ranks);
  EXPECT_TRUE(names_rank(ranks[0].output, 1)) << describe(ranks);
  EXPECT_EQ(ranks[0].output.find("step 00001/"), std::string::npos) << describe(ranks);
}

}  // namespace
}  // namespace nanoforge
