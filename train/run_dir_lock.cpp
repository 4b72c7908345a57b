// RunDirLock: flock(2) on RUN/run.lock, the holder's record written after the lock is taken; the mount table
// read only on NFS (statfs's magic number), whose client shares flock locks through the server unless the
// mount keeps them local. The lock file is opened only as a plain file of its own (no link followed, no
// other names, no pipe or device): the lock truncates it and writes into it.
#include "train/run_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "support/status.h"

namespace nanoforge {
namespace {

constexpr long kNfsSuperMagic = 0x6969;  // linux/magic.h NFS_SUPER_MAGIC
constexpr size_t kMaxRecordBytes = 4096;

// /proc/mounts writes a space in a path as \040 (and tab, newline, backslash likewise).
std::string unescape_mount_path(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view digits = field.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        out += static_cast<char>(std::stoi(std::string(digits), nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

bool path_is_under(const std::string& directory, const std::string& mount_point) {
  if (mount_point == "/") return true;
  return directory.compare(0, mount_point.size(), mount_point) == 0 &&
         (directory.size() == mount_point.size() || directory[mount_point.size()] == '/');
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string now_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

std::string read_record(int fd) {
  std::string record(kMaxRecordBytes, '\0');
  const ssize_t got = pread(fd, record.data(), record.size(), 0);
  record.resize(got > 0 ? static_cast<size_t>(got) : 0);
  while (!record.empty() && (record.back() == '\n' || record.back() == '\0'))
    record.pop_back();
  return record;
}

absl::Status not_a_lock_file(const std::string& path, const struct stat& info) {
  const std::string what = S_ISLNK(info.st_mode)    ? "is a symbolic link"
                           : S_ISFIFO(info.st_mode) ? "is a pipe, not a regular file"
                           : S_ISDIR(info.st_mode)  ? "is a directory, not a regular file"
                           : !S_ISREG(info.st_mode)
                               ? "is a device or socket, not a regular file"
                               : fmt::format("has {} names (hard links to one file)", info.st_nlink);
  return absl::FailedPreconditionError(fmt::format(
      "{} {}: the run directory's lock file must be a file of its own, since taking the lock truncates it "
      "and writes the holder's name into it; remove it (nanoforge creates it)",
      path, what));
}

// RUN/run.lock opened for reading and writing, created when absent: never through a symbolic link
// (O_NOFOLLOW; the probe's link had its target truncated), never a file with other names, and O_NONBLOCK so
// that opening a pipe or device cannot wait.
absl::StatusOr<int> open_lock_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat info {};
  if (fd < 0) {
    const int error = errno;
    if (lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) return not_a_lock_file(path, info);
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot open the run directory's lock file: {}", path, std::strerror(error)));
  }
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot inspect the run directory's lock file: {}", path, std::strerror(error)));
  }
  if (!S_ISREG(info.st_mode) || info.st_nlink != 1) {
    close(fd);
    return not_a_lock_file(path, info);
  }
  return fd;
}

}  // namespace

std::string unshared_lock_reason(std::string_view mounts, const std::string& directory) {
  std::string best_point, best_type, best_options;
  const std::vector<std::string> lines = absl::StrSplit(std::string(mounts), '\n');
  for (const std::string& line : lines) {
    const std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 4) continue;
    const std::string point = unescape_mount_path(fields[1]);
    if (!path_is_under(directory, point) || point.size() < best_point.size()) continue;
    best_point = point;  // the last of equal mount points is the one on top
    best_type = fields[2];
    best_options = fields[3];
  }
  if (best_type != "nfs" && best_type != "nfs4") return "";
  const std::vector<std::string> options = absl::StrSplit(best_options, ',');
  for (const std::string& option : options) {
    if (option == "nolock" || option == "local_lock=flock" || option == "local_lock=all") {
      return fmt::format(
          "it is on NFS ({} mounted at {} with {}), where flock locks stay on this machine: another machine "
          "could start a run into the same directory",
          best_type, best_point, option);
    }
  }
  return "";
}

absl::StatusOr<RunDirLock> RunDirLock::acquire(const std::string& run_dir, std::string* previous_holder) {
  const std::string path = (std::filesystem::path(run_dir) / "run.lock").string();
  struct statfs file_system {};
  if (statfs(run_dir.c_str(), &file_system) == 0 && file_system.f_type == kNfsSuperMagic) {
    std::error_code error;
    const std::string absolute = std::filesystem::canonical(run_dir, error).string();
    std::ifstream mounts_file("/proc/mounts");
    const std::string mounts((std::istreambuf_iterator<char>(mounts_file)), std::istreambuf_iterator<char>());
    if (const std::string reason = unshared_lock_reason(mounts, absolute); !reason.empty()) {
      return absl::FailedPreconditionError(fmt::format(
          "cannot lock the run directory {}: {}. Put the run directory on a local file system or on an NFS "
          "mount that locks on the server (without nolock or local_lock)",
          run_dir, reason));
    }
  }
  NANOFORGE_ASSIGN_OR_RETURN(const int fd, open_lock_file(path));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_record(fd);
    close(fd);  // not held: the holder's record stays as it is
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(fmt::format(
          "{} is in use by another training run ({}; lock file {}): wait for it to finish, or choose another "
          "run directory (--run-dir)",
          run_dir, holder.empty() ? "a process that has not yet written its name" : holder, path));
    }
    return absl::FailedPreconditionError(fmt::format(
        "cannot lock the run directory {}: flock on {} failed: {} (the file system does not support locks); "
        "put the run directory on a file system that does (a local disk, or NFS locking on the server)",
        run_dir, path, std::strerror(error)));
  }
  RunDirLock lock(fd, path);
  if (previous_holder != nullptr) *previous_holder = read_record(fd);
  const std::string record = fmt::format("host {} pid {} started {}\n", this_host(), getpid(), now_utc());
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size()) || fsync(fd) != 0) {
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot write the lock holder's record: {}", path, std::strerror(errno)));
  }
  return lock;
}

RunDirLock::~RunDirLock() {
  if (fd_ < 0) return;
  [[maybe_unused]] const int cleared = ftruncate(fd_, 0);
  close(fd_);  // releases the flock
}

}  // namespace nanoforge
