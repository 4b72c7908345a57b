// check_output_file_path by the name's own type (symlink_status); write_file_atomically creates PATH.tmp
// exclusively (O_CREAT | O_EXCL, which follows no link), writes and closes it, then renames it over PATH;
// check_output_directory_is_own lists the directory without following links.
#include "support/output_path.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace nanoforge {

absl::Status check_output_file_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (error || status.type() == fs::file_type::not_found || status.type() == fs::file_type::regular) {
    return absl::OkStatus();  // a path that cannot be inspected fails, with its reason, when written
  }
  const char* kind = status.type() == fs::file_type::directory ? "a directory"
                     : status.type() == fs::file_type::symlink ? "a symbolic link"
                     : status.type() == fs::file_type::fifo    ? "a pipe"
                     : status.type() == fs::file_type::socket  ? "a socket"
                                                               : "a device";
  return absl::InvalidArgumentError(fmt::format(
      "{} is {}, not a regular file: results are written to a new file renamed into place, which would "
      "replace it; give the path of a file",
      path, kind));
}

absl::Status rename_into_place(const std::string& temporary, const std::string& path) {
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    return absl::InternalError(fmt::format("cannot rename {} to {}: {}", temporary, path, error.message()));
  return absl::OkStatus();
}

namespace {

// What already holds `path` (lstat, so a symbolic link is named as one), for messages.
std::string what_is_at(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return "unreadable";
  if (S_ISLNK(info.st_mode)) return "a symbolic link";
  if (S_ISFIFO(info.st_mode)) return "a pipe";
  if (S_ISDIR(info.st_mode)) return "a directory";
  if (S_ISREG(info.st_mode)) return "a file";
  return "a device or socket";
}

absl::Status write_all(int fd, std::string_view contents, const std::string& temporary) {
  while (!contents.empty()) {
    const ssize_t written = ::write(fd, contents.data(), contents.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      return absl::DataLossError(fmt::format("{}: write failed: {}", temporary,
                                             written < 0 ? std::strerror(errno) : "nothing written"));
    }
    contents.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status write_file_atomically(const std::string& path, std::string_view contents) {
  if (absl::Status usable = check_output_file_path(path); !usable.ok()) return usable;
  const std::string temporary = path + kTemporaryFileSuffix;
  // Created here or not at all: O_EXCL never opens what the name already holds (a link would be written
  // through, a pipe would block the open, another file would be truncated).
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) {
      return absl::AlreadyExistsError(fmt::format(
          "{} already exists ({}): the result is written there first and renamed to {}; remove it (a "
          "leftover of an interrupted write) or give another output path",
          temporary, what_is_at(temporary), path));
    }
    return absl::PermissionDeniedError(fmt::format("{}: cannot create: {}", temporary, std::strerror(error)));
  }
  absl::Status written = write_all(fd, contents, temporary);
  if (::close(fd) != 0 && written.ok()) {
    written = absl::DataLossError(
        fmt::format("{}: write failed when it was closed (disk full?): {}", temporary, std::strerror(errno)));
  }
  if (written.ok()) written = rename_into_place(temporary, path);
  if (!written.ok()) ::unlink(temporary.c_str());  // ours: created above
  return written;
}

absl::Status check_output_directory_is_own(const std::string& command, const std::string& flag,
                                           const std::string& dir,
                                           const std::function<bool(const std::string& name)>& is_own,
                                           const std::string& remedy) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return absl::OkStatus();
  std::vector<std::string> foreign;
  for (fs::directory_iterator entry(dir, error), end; !error && entry != end; entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (!is_own(name)) foreign.push_back(name);
  }
  if (error) {
    return absl::PermissionDeniedError(
        fmt::format("{} {}: cannot list the directory: {}", flag, dir, error.message()));
  }
  if (foreign.empty()) return absl::OkStatus();
  const std::string first = *std::min_element(foreign.begin(), foreign.end());
  return absl::FailedPreconditionError(fmt::format(
      "{} {} is not a directory of {}'s outputs: it holds {}{} nanoforge did not write, and {} writes "
      "only into an empty or new directory or one holding only its own files. Nothing was changed; {}",
      flag, dir, command, (fs::path(dir) / first).string(),
      foreign.size() == 1
          ? std::string(", which")
          : fmt::format(" and {} other entr{} that", foreign.size() - 1, foreign.size() == 2 ? "y" : "ies"),
      command, remedy));
}

}  // namespace nanoforge
