// check_output_file_path: a result may go to a new path or over a regular file, never over what a rename
// would destroy — a device, a pipe, a symbolic link or a directory (`--out /dev/full` run as root once
// replaced the device with a regular file).
#include "support/output_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace nanoforge
