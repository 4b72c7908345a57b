// A directory of one's own for scratch files, removed with everything in it when its owner goes. The benches
// write synthetic shards and whole checkpoints (gigabytes at depth 20) into one: an error on the way must not
// leave them behind, and a --dir the user names (say, a run directory) must never have its files replaced.
#pragma once

#include <absl/status/statusor.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace nanoforge {

class TemporaryDirectory {
 public:
  // A new, empty directory parent/<prefix>XXXXXX (mkdtemp: a name no one else holds). The error names the
  // parent and why it failed (missing, not a directory, not writable).
  static absl::StatusOr<TemporaryDirectory> create(const std::filesystem::path& parent,
                                                   std::string_view prefix);

  TemporaryDirectory(TemporaryDirectory&& other) noexcept;
  TemporaryDirectory& operator=(TemporaryDirectory&& other) noexcept;
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory();  // removes the directory and what it holds; errors are ignored

  const std::string& path() const { return path_; }

 private:
  explicit TemporaryDirectory(std::string path) : path_(std::move(path)) {}
  void remove();

  std::string path_;  // empty once moved from
};

}  // namespace nanoforge
