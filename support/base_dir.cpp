// The base directory from the environment, read at each call (the tests set it per case).
#include "support/base_dir.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

namespace nanoforge {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

absl::StatusOr<std::string> under_base_dir(const char* name) {
  absl::StatusOr<std::string> base = base_dir();
  if (!base.ok()) return base.status();
  return (std::filesystem::path(*base) / name).string();
}

}  // namespace

absl::StatusOr<std::string> base_dir() {
  if (std::string base = environment(kBaseDirVariable); !base.empty()) return base;
  const std::string home = environment("HOME");
  if (home.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("neither {} nor HOME is set, so nanoforge has no default place for its data "
                    "($HOME/.cache/nanoforge): "
                    "set {} to the directory to use, or give the path yourself",
                    kBaseDirVariable, kBaseDirVariable));
  }
  return (std::filesystem::path(home) / ".cache" / "nanoforge").string();
}

absl::StatusOr<std::string> default_tokenizer_dir() {
  return under_base_dir("tokenizer");
}

absl::StatusOr<std::string> default_shards_dir() {
  return under_base_dir("shards");
}

}  // namespace nanoforge
