// check_output_file_path: a result may go to a new path or over a regular file, never over what a rename
// would destroy — a device, a pipe, a symbolic link or a directory (`--out /dev/full` run as root once
// replaced the device with a regular file). write_file_atomically never writes through what PATH.tmp already
// is: a link's target was replaced, a pipe blocked the command for ever. check_output_directory_is_own
// refuses a directory holding anything but the command's own files (the README's `--out data/tokenizer`
// once wrote beside the source).
#include "support/output_path.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

void expect_refused(const std::string& path, const std::string& kind) {
  const absl::Status status = check_output_file_path(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << path;
  EXPECT_NE(status.message().find(path + " is " + kind + ", not a regular file"), std::string::npos)
      << status;
}

TEST(OutputPath, ANewPathOrARegularFileIsFine) {
  const fs::path dir = fs::temp_directory_path();
  EXPECT_TRUE(check_output_file_path((dir / "new.json").string()).ok());
  std::ofstream(dir / "old.json") << "{}";
  EXPECT_TRUE(check_output_file_path((dir / "old.json").string()).ok());
}

TEST(OutputPath, WhatARenameWouldReplaceIsRefused) {
  const fs::path dir = fs::temp_directory_path();
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  expect_refused((dir / "pipe").string(), "a pipe");
  std::ofstream(dir / "target.json") << "{}";
  fs::create_symlink(dir / "target.json", dir / "link.json");
  expect_refused((dir / "link.json").string(), "a symbolic link");
  expect_refused(dir.string(), "a directory");
  expect_refused("/dev/null", "a device");  // only inspected, never written
}

std::string read(const fs::path& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

// An empty folder of the test's own under the temporary directory (emptied first: a test may run twice).
fs::path own_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(OutputPath, AResultIsWrittenAndReplacesAnEarlierOne) {
  const fs::path out = own_dir("replaced") / "result.json";
  std::ofstream(out) << "earlier";
  ASSERT_TRUE(write_file_atomically(out.string(), "{\"new\": 1}\n").ok());
  EXPECT_EQ(read(out), "{\"new\": 1}\n");
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

TEST(OutputPath, ATemporaryNameThatIsALinkIsRefusedAndItsTargetKept) {
  const fs::path dir = own_dir("link");
  std::ofstream(dir / "victim") << "precious";
  fs::create_symlink(dir / "victim", dir / "result.json.tmp");
  const absl::Status status = write_file_atomically((dir / "result.json").string(), "{}");
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_NE(status.message().find((dir / "result.json.tmp").string() + " already exists (a symbolic link)"),
            std::string::npos)
      << status;
  EXPECT_EQ(read(dir / "victim"), "precious");
  EXPECT_TRUE(fs::is_symlink(dir / "result.json.tmp"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "result.json"))) << "nothing renamed into place";
}

TEST(OutputPath, ATemporaryNameThatIsAPipeIsRefusedWithoutWaitingForAReader) {
  const fs::path dir = own_dir("pipe_temporary");
  const fs::path pipe = dir / "result.json.tmp";
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  std::future<absl::Status> writing = std::async(
      std::launch::async, [&] { return write_file_atomically((dir / "result.json").string(), "{}"); });
  if (writing.wait_for(std::chrono::seconds(60)) == std::future_status::timeout) {
    const int reader = ::open(pipe.c_str(), O_RDONLY | O_NONBLOCK);  // lets the blocked open return
    writing.wait();
    ::close(reader);
    FAIL() << "write_file_atomically waited for a reader of " << pipe;
  }
  const absl::Status status = writing.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_NE(status.message().find("already exists (a pipe)"), std::string::npos) << status;
}

TEST(OutputPath, ALeftoverTemporaryFileIsNamedNotOverwritten) {
  const fs::path dir = own_dir("leftover");
  std::ofstream(dir / "result.json.tmp") << "someone's";
  const absl::Status status = write_file_atomically((dir / "result.json").string(), "{}");
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_NE(
      status.message().find("remove it (a leftover of an interrupted write) or give another output path"),
      std::string::npos)
      << status;
  EXPECT_EQ(read(dir / "result.json.tmp"), "someone's");
}

TEST(OutputPath, ADirectoryHoldingOtherFilesIsRefusedNamingTheFirst) {
  const auto is_own = [](const std::string& name) { return name == "ours.txt"; };
  const fs::path dir = own_dir("own_dir");
  EXPECT_TRUE(check_output_directory_is_own("cmd", "--out", (dir / "new").string(), is_own, "fix").ok());
  EXPECT_TRUE(check_output_directory_is_own("cmd", "--out", dir.string(), is_own, "fix").ok()) << "empty";
  std::ofstream(dir / "ours.txt") << "ours";
  EXPECT_TRUE(check_output_directory_is_own("cmd", "--out", dir.string(), is_own, "fix").ok());

  std::ofstream(dir / "merge.cpp") << "source";
  const absl::Status one =
      check_output_directory_is_own("cmd", "--out", dir.string(), is_own, "pick another");
  EXPECT_EQ(one.code(), absl::StatusCode::kFailedPrecondition) << one;
  EXPECT_NE(one.message().find("--out " + dir.string() + " is not a directory of cmd's outputs: it holds " +
                               (dir / "merge.cpp").string() + ", which nanoforge did not write"),
            std::string::npos)
      << one;
  EXPECT_NE(one.message().find("Nothing was changed; pick another"), std::string::npos) << one;
  fs::create_directories(dir / "include");  // a directory counts as much as a file, and names come in order
  const absl::Status two = check_output_directory_is_own("cmd", "--out", dir.string(), is_own, "fix");
  EXPECT_NE(two.message().find("it holds " + (dir / "include").string() +
                               " and 1 other entry that nanoforge did not write"),
            std::string::npos)
      << two;
  EXPECT_EQ(read(dir / "merge.cpp"), "source");
}

}  // namespace
}  // namespace nanoforge
