// TemporaryDirectory: a new directory of its own under the parent, and gone — with what was written into it
// — when its owner goes, also after a move; a parent that is missing is an error naming it.
#include "support/temporary_directory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

TEST(TemporaryDirectory, IsNewUnderItsParentAndRemovedWithItsFiles) {
  const fs::path parent = fs::temp_directory_path();
  std::string path;
  {
    absl::StatusOr<TemporaryDirectory> directory = TemporaryDirectory::create(parent, "scratch_");
    ASSERT_TRUE(directory.ok()) << directory.status();
    path = directory->path();
    EXPECT_EQ(fs::path(path).parent_path(), parent);
    EXPECT_EQ(fs::path(path).filename().string().rfind("scratch_", 0), 0u) << path;
    EXPECT_TRUE(fs::is_empty(path));
    fs::create_directories(path + "/deeper");
    std::ofstream(path + "/deeper/file") << "bytes";
    absl::StatusOr<TemporaryDirectory> other = TemporaryDirectory::create(parent, "scratch_");
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_NE(other->path(), path);
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(TemporaryDirectory, AMoveHandsOverTheDirectory) {
  absl::StatusOr<TemporaryDirectory> directory = TemporaryDirectory::create(fs::temp_directory_path(), "m_");
  ASSERT_TRUE(directory.ok()) << directory.status();
  const std::string path = directory->path();
  std::optional<TemporaryDirectory> holder;
  holder = std::move(directory).value();
  EXPECT_TRUE(fs::is_directory(path));  // the moved-from object removed nothing
  EXPECT_EQ(holder->path(), path);
  holder.reset();
  EXPECT_FALSE(fs::exists(path));
}

TEST(TemporaryDirectory, AMissingParentIsNamed) {
  const std::string missing = (fs::temp_directory_path() / "no_such_parent").string();
  const absl::StatusOr<TemporaryDirectory> directory = TemporaryDirectory::create(missing, "x_");
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find(missing + ": no such directory"), std::string::npos)
      << directory.status();
}

}  // namespace
}  // namespace nanoforge
