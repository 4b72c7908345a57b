// The base directory of nanoforge's data: NANOFORGE_BASE_DIR, else $HOME/.cache/nanoforge (nanochat's
// ~/.cache/nanochat), and an error naming both variables where neither is set.
#include "support/base_dir.h"

#include <gtest/gtest.h>

#include "tests/scoped_environment.h"

namespace nanoforge {
namespace {

using test::ScopedEnvironment;

TEST(BaseDir, NanoforgeBaseDirWins) {
  const ScopedEnvironment base("NANOFORGE_BASE_DIR", "/data/forge");
  const ScopedEnvironment home("HOME", "/home/someone");
  EXPECT_EQ(*base_dir(), "/data/forge");
  EXPECT_EQ(*default_tokenizer_dir(), "/data/forge/tokenizer");
  EXPECT_EQ(*default_shards_dir(), "/data/forge/shards");
}

TEST(BaseDir, UnsetOrEmptyIsTheCacheUnderHome) {
  const ScopedEnvironment home("HOME", "/home/someone");
  for (const std::optional<std::string>& value :
       {std::optional<std::string>(), std::optional<std::string>("")}) {
    const ScopedEnvironment base("NANOFORGE_BASE_DIR", value);
    EXPECT_EQ(*base_dir(), "/home/someone/.cache/nanoforge");
    EXPECT_EQ(*default_shards_dir(), "/home/someone/.cache/nanoforge/shards");
  }
}

TEST(BaseDir, WithoutEitherVariableTheErrorNamesBoth) {
  const ScopedEnvironment base("NANOFORGE_BASE_DIR", std::nullopt);
  const ScopedEnvironment home("HOME", std::nullopt);
  const absl::StatusOr<std::string> tokenizer = default_tokenizer_dir();
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tokenizer.status().message().find("neither NANOFORGE_BASE_DIR nor HOME is set"),
            std::string::npos)
      << tokenizer.status();
  EXPECT_NE(tokenizer.status().message().find("set NANOFORGE_BASE_DIR to the directory to use"),
            std::string::npos)
      << tokenizer.status();
}

}  // namespace
}  // namespace nanoforge
