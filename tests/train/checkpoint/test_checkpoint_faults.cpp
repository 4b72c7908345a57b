// Faults while a run writes checkpoints, injected into a real `nanoforge train` by an LD_PRELOAD library
// (io_fault_shim.c): a full disk, write errors and a failing fsync in the middle of a checkpoint, and a file
// size limit, each stop the run with an error that names the checkpoint and the cause, exit 1 (never a
// crash), and leave the previous checkpoint `latest`, from which the run resumes bit for bit. Signals: one
// during start-up (here: while a resume is opening trainer.h5) ends the process at once, one before the first
// step says that nothing was saved. Saves that a kill interrupted leave directories that a resume removes.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "tests/program_run.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge {
namespace {

using namespace test;

// Checkpoints every 5 steps of 20.
Recipe fault_recipe() {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = 20;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = 5;
  return recipe;
}

const std::string& reference_run() {
  static const std::string dir = [] {
    const std::string run = temp_dir("fault_reference");
    EXPECT_TRUE(run_training(fault_recipe(), stop_at(run, -1)).ok());
    return run;
  }();
  return dir;
}

TrainRunOptions resuming(const std::string& run_dir) {
  TrainRunOptions options;
  options.run_dir = run_dir;
  options.resume = true;
  return options;
}

struct Child {
  pid_t pid;
  std::string log;
};

// `nanoforge train` on the recipe in a child process with the fault library preloaded and `env` added
// (NAME=VALUE each), its output in RUN.log.
Child spawn_training(const std::string& dir, const std::string& run, const std::vector<std::string>& env,
                     bool resume = false, const Recipe& recipe_values = fault_recipe()) {
  const std::string recipe = recipe_file(recipe_values, dir);
  const std::string log = run + ".log";
  std::vector<std::string> environment = env;
  environment.push_back(std::string("LD_PRELOAD=") + test::io_fault_preload());
  const pid_t pid = fork();
  if (pid == 0) {
    for (std::string& entry : environment)
      putenv(entry.data());
    freopen(log.c_str(), "w", stdout);
    freopen(log.c_str(), "a", stderr);
    execl(test::nanoforge_binary(), test::nanoforge_binary(), "train", "--recipe", recipe.c_str(),
          "--run-dir", run.c_str(), resume ? "--resume" : "--noresume", static_cast<char*>(nullptr));
    _exit(127);
  }
  return {pid, log};
}

// The child's wait status; a child still running after `limit` is killed and reported as such (a hang is a
// failure, not a timing measurement: every wait here is for something that takes a second or two).
int wait_for(const Child& child, std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(child.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &status, 0);
      ADD_FAILURE() << "the child did not end in " << limit.count() << " s; its log:\n"
                    << read_bytes(child.log);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

bool wait_for_file(const std::string& path, const Child& child) {
  for (int attempt = 0; attempt < 12000; ++attempt) {
    if (fs::exists(path)) return true;
    if (waitpid(child.pid, nullptr, WNOHANG) == child.pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<std::string> leftovers(const std::string& run) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(run + "/checkpoints")) {
    const std::string name = entry.path().filename().string();
    if (name.find("partial") != std::string::npos || name.find("replaced") != std::string::npos)
      names.push_back(name);
  }
  return names;
}

void expect_stopped_cleanly_at_step_10(const Child& child, int status, const std::string& run,
                                       const std::string& cause) {
  const std::string log = read_bytes(child.log);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n"
                                 << log;
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("checkpoint step_000010 was not saved"), std::string::npos) << log;
  EXPECT_NE(log.find(cause), std::string::npos) << log;
  EXPECT_NE(log.find("checkpoints/latest still names step_000005"), std::string::npos) << log;
  EXPECT_EQ(log.find("HDF5-DIAG"), std::string::npos) << "one error, not libhdf5's stack:\n" << log;
  auto latest = latest_checkpoint(run);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(fs::path(*latest).filename(), "step_000005");
  EXPECT_TRUE(verify_checkpoint(*latest).ok());
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_000010"));
  EXPECT_TRUE(leftovers(run).empty()) << leftovers(run).front();
  ASSERT_TRUE(run_training(fault_recipe(), resuming(run)).ok());
  EXPECT_EQ(final_weights(run), final_weights(reference_run()));
  EXPECT_EQ(losses_by_step(run), losses_by_step(reference_run()));
}

// A full disk or a failing one, hit at different points of the checkpoint of step 10: at its first byte,
// inside model.h5, near the end.
TEST(CheckpointFaults, WriteErrorsStopTheRunAndKeepThePreviousCheckpoint) {
  const std::vector<std::tuple<std::string, std::string, std::string>> faults = {
      {"ENOSPC", "0", "No space left on device"},
      {"EIO", "65536", "Input/output error"},
      {"ENOSPC", "1000000", "No space left on device"},
  };
  int index = 0;
  for (const auto& [error, after, cause] : faults) {
    SCOPED_TRACE(error + " after " + after + " bytes");
    const std::string dir = temp_dir("write_fault_" + std::to_string(index++)), run = dir + "/run";
    const Child child =
        spawn_training(dir, run,
                       {"NANOFORGE_FAULT_PATH=.step_000010.partial", "NANOFORGE_FAULT_ERRNO=" + error,
                        "NANOFORGE_FAULT_AFTER_BYTES=" + after});
    expect_stopped_cleanly_at_step_10(child, wait_for(child), run, cause);
  }
}

TEST(CheckpointFaults, FailingFsyncStopsTheRunAndKeepsThePreviousCheckpoint) {
  const std::string dir = temp_dir("fsync_fault"), run = dir + "/run";
  const Child child =
      spawn_training(dir, run, {"NANOFORGE_FAULT_PATH=.step_000010.partial", "NANOFORGE_FAULT_FSYNC=1"});
  expect_stopped_cleanly_at_step_10(child, wait_for(child), run, "fsync failed");
}

// The probe's case: a checkpoint write beyond the file size limit (SIGXFSZ ignored, so writes fail with
// EFBIG) gave the right error, then a SIGSEGV in libhdf5's shutdown at exit. Every checkpoint of this model
// is larger than the limit, so the first one (step 5) fails; the run must end with status 1.
TEST(CheckpointFaults, FileSizeLimitEndsWithAnErrorNotACrash) {
  const std::string dir = temp_dir("size_limit"), run = dir + "/run";
  const std::string recipe = recipe_file(fault_recipe(), dir);
  const ProgramRun result =
      run_command("bash -c 'trap \"\" XFSZ; ulimit -f 256; exec " + std::string(test::nanoforge_binary()) +
                  " train --recipe " + recipe + " --run-dir " + run + "' 2>&1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("checkpoint step_000005 was not saved"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("File too large"), std::string::npos) << result.output;
  EXPECT_FALSE(latest_checkpoint(run).ok());
  EXPECT_TRUE(leftovers(run).empty());
}

// The probe saw a resume hang in libhdf5 (a damaged file) and SIGTERM only print "stopping after this step"
// while the process went on for 11 minutes. Held here while opening trainer.h5, the process must end at once.
TEST(CheckpointFaults, SignalDuringStartUpEndsTheProcess) {
  const std::string dir = temp_dir("startup_signal"), run = dir + "/run";
  ASSERT_TRUE(run_training(fault_recipe(), stop_at(run, 5)).ok());
  const std::string marker = dir + "/held";
  const Child child = spawn_training(dir, run,
                                     {"NANOFORGE_FAULT_PATH=trainer.h5", "NANOFORGE_FAULT_HOLD=open",
                                      "NANOFORGE_FAULT_HOLD_MARKER=" + marker},
                                     /*resume=*/true);
  ASSERT_TRUE(wait_for_file(marker, child)) << read_bytes(child.log);
  kill(child.pid, SIGTERM);
  const int status = wait_for(child);
  const std::string log = read_bytes(child.log);
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << log;
  EXPECT_NE(log.find("signal during start-up: exiting now"), std::string::npos) << log;
  EXPECT_EQ(fs::path(*latest_checkpoint(run)).filename(), "step_000005");
}

// SIGTERM before the first step (held while printing the step-0 evaluation): nothing was trained and nothing
// saved, and the run must not say otherwise (it said "resume with --resume").
TEST(CheckpointFaults, SignalBeforeTheFirstStepSaysNothingWasSaved) {
  const std::string dir = temp_dir("first_step_signal"), run = dir + "/run";
  Recipe recipe = fault_recipe();
  recipe.train.eval_every = 10;  // an evaluation at step 0, in the loop before the first step
  const std::string marker = dir + "/held";
  const Child child = spawn_training(dir, run,
                                     {"NANOFORGE_FAULT_HOLD=print", "NANOFORGE_FAULT_HOLD_TEXT=val bpb",
                                      "NANOFORGE_FAULT_HOLD_MARKER=" + marker},
                                     /*resume=*/false, recipe);
  ASSERT_TRUE(wait_for_file(marker, child)) << read_bytes(child.log);
  kill(child.pid, SIGTERM);
  const int status = wait_for(child);
  const std::string log = read_bytes(child.log);
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 0) << log;
  EXPECT_NE(log.find("before the first step: nothing was trained and no checkpoint written"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("resume with --resume"), std::string::npos) << log;
  EXPECT_FALSE(latest_checkpoint(run).ok());
}

// Issue 40: a SIGTERM after the last step (here while the last step's line prints) said "continue with
// --resume" of a run that was complete. The run ends as planned, says it is complete and prints its
// summary; as a CPU run, it names no GPU kernel and no NCCL setting.
TEST(CheckpointFaults, SignalAfterTheLastStepEndsACompleteRun) {
  const std::string dir = temp_dir("last_step_signal"), run = dir + "/run";
  const std::string marker = dir + "/held";
  const Child child =
      spawn_training(dir, run,
                     {"NANOFORGE_FAULT_HOLD=print", "NANOFORGE_FAULT_HOLD_TEXT=step 00020/00020",
                      "NANOFORGE_FAULT_HOLD_MARKER=" + marker});
  ASSERT_TRUE(wait_for_file(marker, child)) << read_bytes(child.log);
  kill(child.pid, SIGTERM);
  const int status = wait_for(child);
  const std::string log = read_bytes(child.log);
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 0) << log;
  EXPECT_NE(log.find("done: step 20 of 20 in "), std::string::npos) << log;
  EXPECT_NE(log.find("the run is complete"), std::string::npos) << log;
  EXPECT_EQ(log.find("--resume"), std::string::npos) << log;
  EXPECT_EQ(fs::path(*latest_checkpoint(run)).filename(), "step_000020");
  for (const std::string& line :
       {std::string("  min val bpb      not evaluated"), std::string("  tokens           10,240 ("),
        "  checkpoint       " + run + "/checkpoints/step_000020\n",
        "  report           nanoforge report " + run + " --out " + run + "/report.html\n"}) {
    EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
  }
  for (const char* gpu_only : {"NCCL", "cublaslt", "attention flash"})
    EXPECT_EQ(log.find(gpu_only), std::string::npos) << gpu_only << "\n" << log;
}

// Once the loop runs, a first SIGTERM asks for a stop after the step; when the process cannot get there (held
// here, as a stalled disk or libhdf5 would hold it), a second one ends it at once.
TEST(CheckpointFaults, SecondSignalEndsAStuckRunAtOnce) {
  const std::string dir = temp_dir("second_signal"), run = dir + "/run";
  Recipe recipe = fault_recipe();
  recipe.train.eval_every = 10;
  const std::string marker = dir + "/held";
  const Child child =
      spawn_training(dir, run,
                     {"NANOFORGE_FAULT_HOLD=print", "NANOFORGE_FAULT_HOLD_TEXT=val bpb",
                      "NANOFORGE_FAULT_HOLD_SIGNALS=2", "NANOFORGE_FAULT_HOLD_MARKER=" + marker},
                     /*resume=*/false, recipe);
  ASSERT_TRUE(wait_for_file(marker, child)) << read_bytes(child.log);
  kill(child.pid, SIGTERM);
  for (int attempt = 0;
       attempt < 12000 && read_bytes(child.log).find("stopping after this step") == std::string::npos;
       ++attempt)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(child.pid, SIGTERM);
  const int status = wait_for(child);
  const std::string log = read_bytes(child.log);
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << log;
  EXPECT_NE(log.find("second signal: exiting now"), std::string::npos) << log;
}

// What saves interrupted by kill -9 leave (.step_N.partial-PID, .latest.partial-PID, step_N.replaced-PID, up
// to a whole checkpoint each) is removed when the run starts again, when that PID no longer runs.
TEST(CheckpointFaults, LeftoversOfInterruptedSavesAreRemovedOnResume) {
  const std::string dir = temp_dir("leftovers"), run = dir + "/run";
  ASSERT_TRUE(run_training(fault_recipe(), stop_at(run, 10)).ok());
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string dead = std::to_string(gone), alive = std::to_string(getpid());
  const std::string root = run + "/checkpoints/";
  for (const std::string& name :
       {".step_000015.partial-" + dead, "step_000005.replaced-" + dead, ".step_000016.partial-" + alive}) {
    fs::create_directories(root + name);
    std::ofstream(root + name + "/model.h5") << "half a checkpoint";
  }
  std::ofstream(root + ".latest.partial-" + dead) << "step_0000";
  ASSERT_TRUE(run_training(fault_recipe(), resuming(run)).ok());
  EXPECT_EQ(leftovers(run), std::vector<std::string>{".step_000016.partial-" + alive})
      << "a directory of a running process is not touched";
  EXPECT_EQ(final_weights(run), final_weights(reference_run()));
}

}  // namespace
}  // namespace nanoforge
