// The lock that makes a run directory one run's: RUN/run.lock, flock'd for the whole run by the process that
// writes the directory (rank 0) and holding one line naming it (host, pid, start time). A second `train` into
// the directory is refused naming the holder; a lock file whose holder died (the kernel dropped its flock) is
// taken over, saying so. File systems whose locks are not shared between machines are refused up front.
#pragma once

#include <absl/status/statusor.h>

#include <string>
#include <string_view>

namespace nanoforge {

class RunDirLock {
 public:
  // Takes the lock of `run_dir` (which must exist). `previous_holder` receives the record of a holder that
  // no longer holds it (a process that was killed), or "" when the lock was free and clean.
  // FailedPrecondition when a live process holds it or the file system cannot lock it, saying what to do.
  static absl::StatusOr<RunDirLock> acquire(const std::string& run_dir, std::string* previous_holder);

  RunDirLock(RunDirLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  RunDirLock& operator=(RunDirLock&&) = delete;
  RunDirLock(const RunDirLock&) = delete;
  // Clears the holder record (a clean exit leaves no record to take over) and releases the lock.
  ~RunDirLock();

  const std::string& path() const { return path_; }

 private:
  RunDirLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// Why a file system cannot hold the run-directory lock, or "" when it can: `mounts` is /proc/mounts' text,
// `directory` an absolute path without symlinks. NFS mounted with `nolock` or `local_lock=flock|all` keeps
// flock locks on one client, so two machines could both hold one.
std::string unshared_lock_reason(std::string_view mounts, const std::string& directory);

}  // namespace nanoforge
