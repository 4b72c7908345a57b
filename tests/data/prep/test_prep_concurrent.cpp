// One prep at a time in an --out directory: a second prep started while the first runs (plain, --overwrite
// or --resume) is refused naming the first and changes nothing, and the first ends with the uninterrupted
// prep's data set, byte for byte. The first is held mid-way by NANOFORGE_PREP_FAULT=stop_after_document@N
// (it stops itself with SIGSTOP, which waitpid reports), so it provably runs while the second starts. A
// prep killed with SIGKILL leaves its lock file behind, which never blocks the next.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "tests/data/prep/prep_test_files.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using testing::corpus_lines;
using testing::files_that_differ;
using testing::fresh_temp_dir;
using testing::golden_dir;
using testing::load_train_shards;
using testing::prep_command;
using testing::prep_files;
using testing::read_file;
using testing::write_file;

// `nanoforge prep` started in the background with NANOFORGE_PREP_FAULT=`fault`, its output in `log`.
pid_t spawn_prep(const std::string& input, const std::string& out, const std::string& extra,
                 const std::string& fault, const std::string& log) {
  const std::string command = "exec >" + log + " 2>&1; exec " + prep_command(input, out, extra);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("NANOFORGE_PREP_FAULT", fault.c_str(), 1);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits (at most two minutes, polling) until the child stops itself or ends: true when it stopped.
bool wait_until_stopped(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (int status = 0; std::chrono::steady_clock::now() < deadline;) {
    const pid_t changed = waitpid(pid, &status, WNOHANG | WUNTRACED);
    if (changed == pid) return WIFSTOPPED(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

// Continues a stopped child and returns its exit status once it ends (at most two minutes; -1 otherwise).
int continue_to_exit(pid_t pid) {
  kill(pid, SIGCONT);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (int status = 0; std::chrono::steady_clock::now() < deadline;) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Every other prep into `out` while `holder` runs is refused naming it, and leaves `out` as it was.
void expect_second_preps_refused(const std::string& input, const std::string& other_input,
                                 const std::string& out, pid_t holder) {
  const std::map<std::string, std::string> before = prep_files(out);
  for (const auto& [second_input, extra] :
       {std::pair{other_input, std::string("--overwrite")}, std::pair{input, std::string("--resume")},
        std::pair{other_input, std::string()}}) {
    SCOPED_TRACE("second prep " + extra);
    const auto second = run_command(prep_command(second_input, out, extra));
    EXPECT_NE(second.exit_code, 0) << second.output;
    for (const std::string& fragment : {"--out " + out + " is in use by another prep",
                                        "pid " + std::to_string(holder) + " ", out + "/prep.lock"}) {
      EXPECT_NE(second.output.find(fragment), std::string::npos) << fragment << " not in " << second.output;
    }
    EXPECT_EQ(files_that_differ(prep_files(out), before), "") << "the refused prep changed the directory";
  }
}

TEST(PrepConcurrent, ASecondPrepIsRefusedWhileTheFirstRunsAndTheFirstEndsWhole) {
  const std::string dir = fresh_temp_dir("prep_concurrent");
  const std::string input = dir + "/corpus.jsonl", other_input = dir + "/other.jsonl";
  write_file(input, corpus_lines());
  write_file(other_input, corpus_lines("other"));
  const auto whole = run_command(prep_command(input, dir + "/whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::map<std::string, std::string> expected = prep_files(dir + "/whole");

  const std::string out = dir + "/out";
  const pid_t first = spawn_prep(input, out, "", "stop_after_document@200", dir + "/first.log");
  ASSERT_TRUE(wait_until_stopped(first)) << read_file(dir + "/first.log");
  expect_second_preps_refused(input, other_input, out, first);
  ASSERT_EQ(continue_to_exit(first), 0) << read_file(dir + "/first.log");
  EXPECT_EQ(files_that_differ(prep_files(out), expected), "")
      << "every shard and the manifest, byte for byte";
  EXPECT_TRUE(load_train_shards(out).ok()) << load_train_shards(out);
}

TEST(PrepConcurrent, AKilledPrepNeverBlocksTheNextAndAResumeHoldsTheDirectoryToo) {
  const std::string dir = fresh_temp_dir("prep_concurrent_killed");
  const std::string input = dir + "/corpus.jsonl", other_input = dir + "/other.jsonl";
  write_file(input, corpus_lines());
  write_file(other_input, corpus_lines("other"));
  ASSERT_EQ(run_command(prep_command(input, dir + "/whole")).exit_code, 0);
  const std::map<std::string, std::string> expected = prep_files(dir + "/whole");

  const std::string out = dir + "/out";
  const auto killed = run_command("NANOFORGE_PREP_FAULT=after_record@2 " + prep_command(input, out));
  ASSERT_NE(killed.exit_code, 0) << killed.output;
  EXPECT_NE(read_file(out + "/prep.lock").find("pid "), std::string::npos)
      << "the killed prep's record stays";
  const pid_t resume = spawn_prep(input, out, "--resume", "stop_after_document@100", dir + "/resume.log");
  ASSERT_TRUE(wait_until_stopped(resume)) << read_file(dir + "/resume.log");
  expect_second_preps_refused(input, other_input, out, resume);
  ASSERT_EQ(continue_to_exit(resume), 0) << read_file(dir + "/resume.log");
  EXPECT_EQ(files_that_differ(prep_files(out), expected), "")
      << "every shard and the manifest, byte for byte";
  EXPECT_FALSE(fs::exists(out + "/prep.lock")) << "a prep that ends removes its lock file";
}

TEST(PrepConcurrent, ALockFileThatIsNotARegularFileOfItsOwnIsRefusedAndWhatItNamesKept) {
  const std::string dir = fresh_temp_dir("prep_lock_not_plain");
  const std::string input = dir + "/corpus.jsonl", out = dir + "/out", lock = out + "/prep.lock";
  write_file(input, corpus_lines());
  write_file(dir + "/victim", "not prep's");
  fs::create_directories(out);
  const auto expect_refused = [&](const std::string& fragment) {
    const auto refused = run_command(prep_command(input, out));
    EXPECT_NE(refused.exit_code, 0) << refused.output;
    EXPECT_NE(refused.output.find(lock + fragment), std::string::npos) << refused.output;
    EXPECT_EQ(read_file(dir + "/victim"), "not prep's");
    EXPECT_FALSE(fs::exists(out + "/prep.unfinished")) << "refused before anything is written";
    fs::remove(lock);
  };
  fs::create_symlink(dir + "/victim", lock);
  expect_refused(" is a symbolic link, not prep's lock file: remove it");
  fs::create_hard_link(dir + "/victim", lock);
  expect_refused(" has 2 names (a hard link), not prep's lock file: remove it");
  ASSERT_EQ(mkfifo(lock.c_str(), 0600), 0);
  expect_refused(" is a pipe, socket or device, not prep's lock file: remove it");
  fs::create_directory(lock);
  expect_refused(" is a directory, not prep's lock file: remove it");
  const auto prepared = run_command(prep_command(input, out));
  EXPECT_EQ(prepared.exit_code, 0) << "with the offending name gone: " << prepared.output;
}

}  // namespace
}  // namespace nanoforge
