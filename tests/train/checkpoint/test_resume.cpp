// Resuming: exact on the CPU (2N steps = N, stop, resume, N more — losses and final weights bit for bit),
// also across a kill -9 and a crash in the middle of a save; damaged checkpoints are skipped by name; recipe
// changes that would break the run are refused; old checkpoints are pruned by the retention rule; SIGTERM
// ends a run cleanly with a checkpoint; a resumed run's ETA is its own step rate, and its end-of-run summary
// covers the whole run.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/resume.h"

namespace nanoforge {
namespace {

using namespace test;

// The small recipe, checkpointing every 5 steps for 20 steps, keeping every checkpoint.
Recipe resume_recipe() {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = 20;
  recipe.train.eval_every = 10;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = 5;
  return recipe;
}

TrainRunOptions resume_options(const std::string& run_dir) {
  TrainRunOptions options;
  options.run_dir = run_dir;
  options.resume = true;
  return options;
}

TrainRunOptions stop_at_resumed(const std::string& run_dir, int64_t step) {
  TrainRunOptions options = resume_options(run_dir);
  options.stop_at_step = step;
  return options;
}

// The run everything is compared with: 20 steps in one go (computed once per test binary).
const std::string& reference_run() {
  static const std::string dir = [] {
    const std::string run = temp_dir("reference");
    EXPECT_TRUE(run_training(resume_recipe(), stop_at(run, -1)).ok());
    return run;
  }();
  return dir;
}

void expect_same_run(const std::string& run_dir) {
  EXPECT_EQ(losses_by_step(run_dir), losses_by_step(reference_run()));
  EXPECT_EQ(final_weights(run_dir), final_weights(reference_run()));
}

// Starts `nanoforge train` on the recipe in a child process (environment `env` added).
pid_t spawn_training(const std::string& recipe_path, const std::string& run_dir,
                     const std::string& env = "") {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!env.empty()) putenv(const_cast<char*>(env.c_str()));
    const std::string log = run_dir + ".log";
    freopen(log.c_str(), "w", stdout);
    freopen(log.c_str(), "a", stderr);
    execl(test::nanoforge_binary(), test::nanoforge_binary(), "train", "--recipe", recipe_path.c_str(),
          "--run-dir", run_dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits until the child's metrics.jsonl has a training record for `step` (or the child exits).
void wait_for_step(pid_t pid, const std::string& run_dir, int64_t step) {
  for (int attempt = 0; attempt < 6000; ++attempt) {
    if (losses_by_step(run_dir).count(step)) return;
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int wait_exit_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(Resume, TwoRunsInOneProcessAgreeBitForBit) {
  const std::string first = temp_dir("twice_a"), second = temp_dir("twice_b");
  ASSERT_TRUE(run_training(resume_recipe(), stop_at(first, 10)).ok());
  auto before = losses_by_step(first);
  ASSERT_TRUE(run_training(resume_recipe(), resume_options(first)).ok());
  ASSERT_TRUE(run_training(resume_recipe(), stop_at(second, 10)).ok());
  EXPECT_EQ(before, losses_by_step(second));
}

TEST(Resume, StopAndResumeEqualsOneRunBitForBit) {
  const std::string run = temp_dir("split");
  ASSERT_TRUE(run_training(resume_recipe(), stop_at(run, 10)).ok());
  ASSERT_TRUE(run_training(resume_recipe(), resume_options(run)).ok());
  expect_same_run(run);
}

TEST(Resume, AfterKillNineEqualsOneRun) {
  const std::string dir = temp_dir("kill9"), run = dir + "/run";
  const pid_t child = spawn_training(recipe_file(resume_recipe(), dir), run);
  wait_for_step(child, run, 12);  // past the checkpoint at 10, before the one at 15
  kill(child, SIGKILL);
  wait_exit_status(child);
  auto latest = latest_checkpoint(run);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(run_training(resume_recipe(), resume_options(run)).ok());
  expect_same_run(run);
}

TEST(Resume, CrashMidSaveKeepsThePreviousCheckpoint) {
  const std::string dir = temp_dir("fault"), run = dir + "/run";
  const pid_t child =
      spawn_training(recipe_file(resume_recipe(), dir), run, "NANOFORGE_CHECKPOINT_FAULT=after_model@10");
  const int status = wait_exit_status(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the fault injection should abort the child";
  auto latest = latest_checkpoint(run);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(fs::path(*latest).filename(), "step_000005");  // the crashed save of step 10 did not replace it
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_000010"));
  ASSERT_TRUE(run_training(resume_recipe(), resume_options(run)).ok());
  expect_same_run(run);
}

TEST(Resume, DamagedCheckpointIsNamedAndSkipped) {
  const std::string run = temp_dir("corrupt");
  ASSERT_TRUE(run_training(resume_recipe(), stop_at(run, 15)).ok());
  // Flip bytes inside the step-15 weights: a checksum (or HDF5's structure check) must catch it.
  const std::string model = run + "/checkpoints/step_000015/model.h5";
  std::string bytes = read_bytes(model);
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i)
    bytes[i] = static_cast<char>(~bytes[i]);
  std::ofstream(model, std::ios::binary) << bytes;
  std::vector<std::string> skipped;
  auto chosen = newest_valid_checkpoint(run, &skipped);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(fs::path(*chosen).filename(), "step_000010");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("step_000015"), std::string::npos) << skipped[0];
  ASSERT_TRUE(run_training(resume_recipe(), resume_options(run)).ok());
  expect_same_run(run);
}

TEST(Resume, RecipeChangesThatBreakTheRunAreRefused) {
  const std::string run = temp_dir("changes");
  ASSERT_TRUE(run_training(resume_recipe(), stop_at(run, 5)).ok());
  Recipe deeper = resume_recipe();
  deeper.model.depth = 2;
  absl::Status status = run_training(deeper, resume_options(run));
  EXPECT_NE(status.message().find("model.depth was 1 in the checkpoint and is 2 now"), std::string::npos)
      << status;
  Recipe reseeded = resume_recipe();
  reseeded.train.seed = 7;
  status = run_training(reseeded, resume_options(run));
  EXPECT_NE(status.message().find("train.seed"), std::string::npos) << status;
  Recipe cadence = resume_recipe();
  cadence.train.eval_every = 5;  // harmless: allowed
  EXPECT_TRUE(run_training(cadence, stop_at_resumed(run, 10)).ok());
}

TEST(Resume, RetentionKeepsTheNewestAndTheMilestones) {
  const std::string run = temp_dir("retention");
  Recipe recipe = resume_recipe();
  recipe.checkpoint.keep_last = 2;
  recipe.checkpoint.keep_every = 10;
  ASSERT_TRUE(run_training(recipe, stop_at(run, -1)).ok());
  std::vector<std::string> kept;
  for (const auto& entry : fs::directory_iterator(run + "/checkpoints")) {
    if (entry.is_directory()) kept.push_back(entry.path().filename().string());
  }
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"step_000010", "step_000015", "step_000020"}));
}

// Issue 40: resumed at step 16, the ETA was the whole run's training time over the steps this process had
// timed (eta 30.9m for six 25 s steps). It is this process's rate times the steps left: the process's first
// step (untimed, it warms up) by its own time, each later one by the mean of the timed ones so far. The
// end-of-run summary's record (the file's last line) covers the whole run: its steps, tokens, time and best
// validation bits per byte as metrics.jsonl has them, and says where this process started.
TEST(Resume, EtaIsTheProcesssOwnRateAndTheSummaryCoversTheWholeRun) {
  const std::string run = temp_dir("eta");
  ASSERT_TRUE(run_training(resume_recipe(), stop_at(run, 10)).ok());
  ASSERT_TRUE(run_training(resume_recipe(), resume_options(run)).ok());
  const std::vector<std::string> lines = read_lines(run + "/metrics.jsonl");
  std::vector<std::string> resumed;  // the second process's training records, steps 11 to 20
  double step_seconds = 0, min_bpb = 1e9, min_bpb_step = -1;
  for (const std::string& line : lines) {
    if (line.find("\"loss\"") != std::string::npos) {
      step_seconds += number_after(line, "step_ms") / 1e3;
      if (number_after(line, "step") > 10) resumed.push_back(line);
    }
    if (line.find("\"val_bpb\"") != std::string::npos && number_after(line, "val_bpb") < min_bpb) {
      min_bpb = number_after(line, "val_bpb");
      min_bpb_step = number_after(line, "step");
    }
  }
  ASSERT_EQ(resumed.size(), 10u);
  double timed_ms = 0;
  for (size_t i = 0; i < resumed.size(); ++i) {
    const double step_ms = number_after(resumed[i], "step_ms");
    if (i > 0) timed_ms += step_ms;
    const double mean_seconds = (i == 0 ? step_ms : timed_ms / static_cast<double>(i)) / 1e3;
    const double expected = mean_seconds * (20 - number_after(resumed[i], "step"));
    // The file's times have 9 significant digits (5e-9 relative each): their mean is the trainer's to ~1e-8.
    EXPECT_NEAR(number_after(resumed[i], "eta_s"), expected, 1e-6 * expected) << resumed[i];
  }

  const std::string& summary = lines.back();
  ASSERT_NE(summary.find("\"event\": \"summary\""), std::string::npos) << summary;
  EXPECT_EQ(number_after(summary, "step"), 20);
  EXPECT_EQ(number_after(summary, "steps"), 20);
  EXPECT_EQ(number_after(summary, "tokens"), 20 * 512);
  EXPECT_NEAR(number_after(summary, "training_s"), step_seconds, 1e-6 * step_seconds);  // the same sums
  EXPECT_EQ(number_after(summary, "min_val_bpb"), min_bpb);
  EXPECT_EQ(number_after(summary, "min_val_bpb_step"), min_bpb_step);
  EXPECT_EQ(number_after(summary, "process_start_step"), 10);
  EXPECT_NE(summary.find("\"checkpoint\": \"" + run + "/checkpoints/step_000020\""), std::string::npos)
      << summary;
}

TEST(Resume, SigtermStopsAfterTheStepWithACheckpoint) {
  const std::string dir = temp_dir("sigterm"), run = dir + "/run";
  const pid_t child = spawn_training(recipe_file(resume_recipe(), dir), run);
  wait_for_step(child, run, 3);
  kill(child, SIGTERM);
  const int status = wait_exit_status(child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto latest = latest_checkpoint(run);
  ASSERT_TRUE(latest.ok()) << latest.status();
  auto state = read_trainer_state(*latest);
  ASSERT_TRUE(state.ok());
  EXPECT_GE(state->step, 3);
  EXPECT_LT(state->step, 20);
  ASSERT_TRUE(run_training(resume_recipe(), resume_options(run)).ok());
  expect_same_run(run);
}

}  // namespace
}  // namespace nanoforge
