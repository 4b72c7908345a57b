// OUT/prep.lock: flock'd by the prep that writes OUT, from before it looks at the directory to its end, and
// holding one line naming that prep (pid, host, start time, command line). A second prep into OUT (to start,
// overwrite or resume) is refused naming the first, before it changes anything. The kernel drops the lock of
// a killed prep, so its file never blocks the next; a prep that ends removes it. Opened without following a
// link, and refused unless a regular file of one name: nothing is ever written through it into another file.
// Header-only: prep.cpp is its one user.
#pragma once

#include <absl/status/statusor.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

namespace nanoforge {

class PrepLock {
 public:
  static constexpr char kFileName[] = "prep.lock";

  // FailedPrecondition naming the holder when another prep holds it, or naming the file when it is not one
  // prep may use (a link, a directory, a pipe, a second name of another file).
  static absl::StatusOr<PrepLock> acquire(const std::string& out_dir, const std::string& command_line);

  PrepLock(PrepLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  PrepLock& operator=(PrepLock&&) = delete;
  PrepLock(const PrepLock&) = delete;
  ~PrepLock() {
    if (fd_ < 0) return;
    if (names(fd_, path_)) unlink(path_.c_str());  // while still locked: the next prep makes a new one
    close(fd_);
  }

 private:
  static constexpr size_t kMaxRecordBytes = 4096;
  // Each retry means a holder ended after our open and removed the file we opened.
  static constexpr int kMaxAttempts = 100;

  PrepLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  // Whether `path` still names the file open as `fd`.
  static bool names(int fd, const std::string& path) {
    struct stat open_file {};
    struct stat named {};
    return fstat(fd, &open_file) == 0 && lstat(path.c_str(), &named) == 0 &&
           open_file.st_dev == named.st_dev && open_file.st_ino == named.st_ino;
  }

  // The holder's line: at most 4 KiB, control characters replaced (the file is another process's).
  static std::string read_record(int fd) {
    std::string record(kMaxRecordBytes, '\0');
    const ssize_t got = pread(fd, record.data(), record.size(), 0);
    record.resize(got > 0 ? static_cast<size_t>(got) : 0);
    while (!record.empty() && (record.back() == '\n' || record.back() == '\0'))
      record.pop_back();
    for (char& c : record)
      if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) c = '?';
    return record;
  }

  static std::string describe_this_prep(const std::string& command_line) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char since[32];
    std::strftime(since, sizeof(since), "%Y-%m-%d %H:%M:%S UTC", &utc);
    return fmt::format("pid {} on {} since {}: {}", getpid(), host, since, command_line)
               .substr(0, kMaxRecordBytes - 1) +
           "\n";
  }

  int fd_ = -1;
  std::string path_;
};

inline absl::StatusOr<PrepLock> PrepLock::acquire(const std::string& out_dir,
                                                  const std::string& command_line) {
  const std::string path = (std::filesystem::path(out_dir) / kFileName).string();
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int error = errno;
      if (error == ELOOP || error == EISDIR) {
        return absl::FailedPreconditionError(fmt::format("{} is a {}, not prep's lock file: remove it", path,
                                                         error == ELOOP ? "symbolic link" : "directory"));
      }
      return absl::FailedPreconditionError(
          fmt::format("{}: cannot open prep's lock file: {}; make --out {} writable", path,
                      std::strerror(error), out_dir));
    }
    struct stat info {};
    const bool regular = fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
    if (regular && info.st_nlink == 0) {  // its holder ended and removed it after we opened it: open again
      close(fd);
      continue;
    }
    if (!regular || info.st_nlink != 1) {  // a hard link: the record would overwrite the file it also names
      close(fd);
      return absl::FailedPreconditionError(
          fmt::format("{} {}, not prep's lock file: remove it", path,
                      regular ? fmt::format("has {} names (a hard link)", info.st_nlink)
                              : std::string("is a pipe, socket or device")));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      const std::string holder = read_record(fd);
      close(fd);
      if (error == EWOULDBLOCK) {
        return absl::FailedPreconditionError(fmt::format(
            "--out {} is in use by another prep ({}; its lock file {}): wait for it to end, or give another "
            "--out. Nothing was changed",
            out_dir, holder.empty() ? "one that has not yet written its name" : holder, path));
      }
      return absl::FailedPreconditionError(fmt::format(
          "cannot lock {}: {} (the file system does not support flock): put --out on one that does", path,
          std::strerror(error)));
    }
    if (!names(fd, path)) {  // its holder ended and removed it after we opened it: take the one there now
      close(fd);
      continue;
    }
    const std::string record = describe_this_prep(command_line);
    if (ftruncate(fd, 0) != 0 ||
        pwrite(fd, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
      const int error = errno;
      close(fd);
      return absl::PermissionDeniedError(fmt::format("{}: cannot write: {}", path, std::strerror(error)));
    }
    return PrepLock(fd, path);
  }
  return absl::UnavailableError(
      fmt::format("{}: other preps keep taking and removing it; try again when none runs", path));
}

}  // namespace nanoforge
