#include "support/temporary_directory.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

namespace nanoforge {

absl::StatusOr<TemporaryDirectory> TemporaryDirectory::create(const std::filesystem::path& parent,
                                                              std::string_view prefix) {
  std::error_code error;
  if (!std::filesystem::is_directory(parent, error)) {
    return absl::NotFoundError(fmt::format("{}: no such directory", parent.string()));
  }
  std::string pattern = (parent / fmt::format("{}XXXXXX", prefix)).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create a directory in it: {}", parent.string(), std::strerror(errno)));
  }
  return TemporaryDirectory(std::move(pattern));
}

TemporaryDirectory::TemporaryDirectory(TemporaryDirectory&& other) noexcept
    : path_(std::exchange(other.path_, std::string())) {}

TemporaryDirectory& TemporaryDirectory::operator=(TemporaryDirectory&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::exchange(other.path_, std::string());
  }
  return *this;
}

TemporaryDirectory::~TemporaryDirectory() {
  remove();
}

void TemporaryDirectory::remove() {
  if (path_.empty()) return;
  std::error_code error;
  std::filesystem::remove_all(path_, error);
  path_.clear();
}

}  // namespace nanoforge
