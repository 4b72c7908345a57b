// The run directory's lock (train/run_dir_lock.h), on the program: two trainings into one directory never
// both run (the probe's interleaved metrics.jsonl and shared checkpoint names); the refusal names the holder;
// the lock file of a killed run is taken over, saying so; NFS mounts that keep locks local are refused; a
// lock file that is not the directory's own plain file is refused, and what it names left as it was.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/program_run.h"
#include "tests/train/training_fixture.h"
#include "train/run_dir_lock.h"

namespace nanoforge {
namespace {

using namespace test;

struct Child {
  pid_t pid;
  std::string log;
};

Child spawn_train(const std::string& recipe, const std::string& run, const std::string& log, bool resume) {
  const pid_t pid = fork();
  if (pid == 0) {
    // One open file for both streams: with two, stdout's buffered text (written at exit, from its own
    // offset 0) would overwrite the error that stderr had appended.
    freopen(log.c_str(), "w", stdout);
    dup2(fileno(stdout), fileno(stderr));
    execl(nanoforge_binary(), nanoforge_binary(), "train", "--recipe", recipe.c_str(), "--run-dir",
          run.c_str(), resume ? "--resume" : "--noresume", static_cast<char*>(nullptr));
    _exit(127);
  }
  return {pid, log};
}

// The exit status of a child that must end within two minutes (a hang is a failure).
int exit_status(const Child& child) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  int status = 0;
  while (waitpid(child.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &status, 0);
      ADD_FAILURE() << "the child did not end; its log:\n" << read_bytes(child.log);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Waits until the lock file names the child, i.e. the child holds the lock (it writes its record after
// flock succeeds). False when the child ended first.
bool wait_until_holding(const std::string& run, const Child& child) {
  const std::string wanted = fmt::format("pid {} ", child.pid);
  for (int attempt = 0; attempt < 12000; ++attempt) {
    if (read_bytes(run + "/run.lock").find(wanted) != std::string::npos) return true;
    if (waitpid(child.pid, nullptr, WNOHANG) == child.pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

Recipe lock_recipe(int64_t steps) {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = steps;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = -1;
  return recipe;
}

TEST(RunDirLock, ATrainingIntoADirectoryInUseIsRefusedNamingTheHolder) {
  const std::string dir = temp_dir("lock_in_use"), run = dir + "/run";
  const std::string recipe = recipe_file(lock_recipe(100000), dir);
  const Child holder = spawn_train(recipe, run, dir + "/holder.log", false);
  ASSERT_TRUE(wait_until_holding(run, holder)) << read_bytes(holder.log);
  kill(holder.pid, SIGSTOP);  // it stays the holder, however slow this machine is
  const std::string metrics_before = read_bytes(run + "/metrics.jsonl");
  for (const bool resume : {false, true}) {
    const ProgramRun second =
        run_command(fmt::format("{} train --recipe {} --run-dir {} {} 2>&1", nanoforge_binary(), recipe, run,
                                resume ? "--resume" : ""));
    EXPECT_NE(second.exit_code, 0) << second.output;
    for (const std::string& fragment :
         {run + " is in use by another training run",
          fmt::format("host {} pid {} started ", host_name(), holder.pid),
          std::string("wait for it to finish, or choose another run directory (--run-dir)")}) {
      EXPECT_NE(second.output.find(fragment), std::string::npos) << fragment << " not in:\n" << second.output;
    }
  }
  EXPECT_EQ(read_bytes(run + "/metrics.jsonl"), metrics_before) << "the refused runs wrote nothing";
  kill(holder.pid, SIGKILL);
  kill(holder.pid, SIGCONT);
  waitpid(holder.pid, nullptr, 0);
}

// Started together, as the probe started them: one trains, the other stops without writing (either at the
// lock or, when the first has finished already, at the directory that holds a run).
TEST(RunDirLock, OfTwoTrainingsStartedAtOnceIntoOneDirectoryExactlyOneRuns) {
  const std::string dir = temp_dir("lock_race"), run = dir + "/run";
  const std::string recipe = recipe_file(lock_recipe(3), dir);
  const Child first = spawn_train(recipe, run, dir + "/first.log", false);
  const Child second = spawn_train(recipe, run, dir + "/second.log", false);
  const int first_status = exit_status(first), second_status = exit_status(second);
  EXPECT_EQ((first_status == 0) + (second_status == 0), 1)
      << "exit statuses " << first_status << " and " << second_status << "\n"
      << read_bytes(first.log) << "\n---\n"
      << read_bytes(second.log);
  const std::string refused = read_bytes(first_status == 0 ? second.log : first.log);
  EXPECT_NE(refused.find(run), std::string::npos) << refused;
  EXPECT_EQ(losses_by_step(run).size(), 3u) << "each step once";
}

TEST(RunDirLock, TheLockOfAKilledRunIsTakenOverSayingSo) {
  const std::string dir = temp_dir("lock_stale"), run = dir + "/run";
  const std::string recipe = recipe_file(lock_recipe(100000), dir);
  const Child killed = spawn_train(recipe, run, dir + "/killed.log", false);
  ASSERT_TRUE(wait_until_holding(run, killed)) << read_bytes(killed.log);
  kill(killed.pid, SIGKILL);
  waitpid(killed.pid, nullptr, 0);
  const std::string short_recipe = recipe_file(lock_recipe(2), dir);
  const ProgramRun resumed = run_command(
      fmt::format("{} train --recipe {} --run-dir {} --resume 2>&1", nanoforge_binary(), short_recipe, run));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string line = fmt::format("run directory: took over {}/run.lock from host {} pid {} started ",
                                       run, host_name(), killed.pid);
  EXPECT_NE(resumed.output.find(line), std::string::npos) << line << " not in:\n" << resumed.output;
  EXPECT_EQ(read_bytes(run + "/run.lock"), "") << "a run that ends leaves no holder behind";
  const ProgramRun again = run_command(
      fmt::format("{} train --recipe {} --run-dir {} --resume 2>&1", nanoforge_binary(), short_recipe, run));
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.find("took over"), std::string::npos) << again.output;
}

// The probe's run.lock was a symbolic link: the lock truncated its target and wrote the holder's record
// into it (a dangling one would have been created). A hard link did the same to its other name's file.
TEST(RunDirLock, ALockFileThatIsALinkOrNotAPlainFileIsRefusedAndWhatItNamesKept) {
  const std::string dir = temp_dir("lock_not_plain"), run = dir + "/run", lock = run + "/run.lock";
  const std::string victim = dir + "/victim";
  fs::create_directories(run);
  std::ofstream(victim) << "precious";
  // Each case: refused with the fragment after the lock's path, and the victim as it was.
  const auto expect_refused = [&](const std::string& case_name, const std::string& fragment) {
    {
      const absl::StatusOr<RunDirLock> taken = RunDirLock::acquire(run, nullptr);
      EXPECT_EQ(taken.status().code(), absl::StatusCode::kFailedPrecondition) << case_name;
      EXPECT_NE(taken.status().message().find(lock + fragment), std::string::npos)
          << case_name << ": " << taken.status();
    }  // a lock wrongly taken is released here, as at the end of a run
    EXPECT_EQ(read_bytes(victim), "precious") << case_name;
    std::ofstream(victim) << "precious";
    fs::remove(lock);
  };
  fs::create_symlink(victim, lock);
  expect_refused("a link", " is a symbolic link");
  fs::create_symlink(dir + "/created_through_the_link", lock);
  expect_refused("a dangling link", " is a symbolic link");
  EXPECT_FALSE(fs::exists(dir + "/created_through_the_link"));
  fs::create_hard_link(victim, lock);
  expect_refused("a hard link", " has 2 names");
  ASSERT_EQ(mkfifo(lock.c_str(), 0600), 0);
  expect_refused("a pipe", " is a pipe, not a regular file");
  fs::create_directory(lock);
  expect_refused("a directory", " is a directory, not a regular file");
  std::string previous_holder = "unset";
  EXPECT_TRUE(RunDirLock::acquire(run, &previous_holder).ok()) << "with the offending name gone";
  EXPECT_EQ(previous_holder, "");
}

TEST(RunDirLock, NfsMountsThatKeepLocksOnOneMachineAreRefused) {
  const std::string mounts =
      "/dev/sda1 / ext4 rw,relatime 0 0\n"
      "server:/runs /mnt/runs nfs4 rw,vers=4.2,local_lock=none 0 0\n"
      "server:/old /mnt/old nfs rw,vers=3,nolock 0 0\n"
      "server:/scratch /mnt/my\\040scratch nfs rw,vers=3,local_lock=flock 0 0\n";
  EXPECT_EQ(unshared_lock_reason(mounts, "/home/me/run"), "");
  EXPECT_EQ(unshared_lock_reason(mounts, "/mnt/runs/d20"), "") << "NFS locking on the server is shared";
  EXPECT_NE(unshared_lock_reason(mounts, "/mnt/old/d20").find("with nolock"), std::string::npos);
  EXPECT_NE(unshared_lock_reason(mounts, "/mnt/my scratch/d20").find("local_lock=flock"), std::string::npos);
  EXPECT_EQ(unshared_lock_reason(mounts, "/mnt/older/d20"), "") << "a mount point is a whole path component";
}

}  // namespace
}  // namespace nanoforge
