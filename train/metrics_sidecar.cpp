// MetricsSidecar: posix_spawn of the build's Python on tools/metrics_sidecar.py, in a process group of its
// own (Ctrl-C is the trainer's to handle), with stdin from /dev/null and its output appended to
// RUN_DIR/sidecar.log, so nothing it does can block the trainer. The trainer opens that log itself (never
// through a symbolic link, never waiting on a FIFO) and reads only what the sidecar appended, a bounded
// amount at a time: its warning lines are repeated on the console. Exit status 3 means it has nothing it can
// forward (a package missing, W&B refusing): it is not restarted then.
#include "train/metrics_sidecar.h"

#include <absl/status/statusor.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

extern char** environ;

namespace nanoforge {
namespace {

constexpr int kCannotForward = 3;  // tools/metrics_sidecar.py's CANNOT_FORWARD
constexpr std::string_view kWarningPrefix = "warning: metrics sidecar";  // its warn()
constexpr size_t kLogReadBytes = 64 << 10;  // read of the log at a time: far more than a step's warnings
constexpr size_t kEchoedLineBytes = 1000;

std::string setting(const char* variable, const char* configured) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : configured;
}

// RUN_DIR/sidecar.log for appending and reading: never through a symbolic link (O_NOFOLLOW), never waiting
// on a FIFO (O_NONBLOCK; a FIFO without a reader held posix_spawn, and the trainer with it, for good), and
// only a regular file with one name (through a hard link the log would grow another file).
absl::StatusOr<int> open_sidecar_log(const std::string& path) {
  const std::string fix = "remove it (the trainer creates the sidecar's log)";
  const int fd = open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    if (error == ELOOP)
      return absl::FailedPreconditionError(fmt::format("{} is a symbolic link: {}", path, fix));
    return absl::PermissionDeniedError(fmt::format("cannot open {}: {}", path, std::strerror(error)));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_nlink != 1) {
    close(fd);
    return absl::FailedPreconditionError(fmt::format(
        "{} {}: {}", path,
        S_ISREG(info.st_mode) ? fmt::format("has {} names (hard links to one file)", info.st_nlink)
                              : std::string("is not a regular file (a FIFO or a device?)"),
        fix));
  }
  return fd;
}

off_t file_size(int fd) {
  struct stat info {};
  return fstat(fd, &info) == 0 ? info.st_size : 0;
}

// Bytes [offset, offset + count) of the log, fewer at its end.
std::string read_log(int fd, off_t offset, size_t count) {
  std::string bytes(count, '\0');
  const ssize_t got = pread(fd, bytes.data(), count, offset);
  bytes.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return bytes;
}

// Calls `visit` with each line of `text` (the text between '\n's).
template <typename Visit>
void for_each_line(std::string_view text, Visit visit) {
  while (true) {
    const size_t end = text.find('\n');
    visit(text.substr(0, end));
    if (end == std::string_view::npos) return;
    text.remove_prefix(end + 1);
  }
}

// A log line as it may go to a terminal: control characters (an escape sequence appended by someone else)
// become '?', and a long line is cut.
std::string printable(std::string_view line) {
  std::string text(line.substr(0, kEchoedLineBytes));
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

// The last line of the log, to say in the warning why the sidecar stopped: from its last kLogReadBytes only
// (a log of gigabytes, even a sparse one, is never read whole).
std::string last_log_line(int fd) {
  const off_t size = file_size(fd);
  const off_t start = std::max<off_t>(0, size - static_cast<off_t>(kLogReadBytes));
  const std::string tail = read_log(fd, start, static_cast<size_t>(size - start));
  std::string_view last;
  for_each_line(tail, [&](std::string_view line) {
    if (!line.empty()) last = line;
  });
  return last.empty() ? "no output" : printable(last);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("exit status {}", WEXITSTATUS(status));
}

}  // namespace

std::unique_ptr<MetricsSidecar> MetricsSidecar::start_if_asked(const Recipe::Log& log,
                                                               const std::string& run_dir) {
  // WANDB_MODE wins over log.wandb_mode, as with wandb itself.
  const bool wandb =
      !log.wandb_project.empty() && setting("WANDB_MODE", log.wandb_mode.c_str()) != "disabled";
  if (!wandb && !log.tensorboard) return nullptr;
  absl::StatusOr<int> log_fd = open_sidecar_log(run_dir + "/sidecar.log");
  if (!log_fd.ok()) {
    fmt::print(
        "warning: metrics sidecar: {}; training goes on without W&B or TensorBoard, metrics.jsonl has every "
        "record\n",
        std::string(log_fd.status().message()));
    return nullptr;
  }
  std::unique_ptr<MetricsSidecar> sidecar(
      new MetricsSidecar(run_dir, setting("NANOFORGE_PYTHON", configured_python()),
                         setting("NANOFORGE_METRICS_SIDECAR", configured_sidecar_script()), *log_fd));
  if (!sidecar->spawn()) return nullptr;
  fmt::print("metrics sidecar: pid {} forwards metrics.jsonl ({}{}{}); its output goes to {}/sidecar.log\n",
             sidecar->pid_, wandb ? "W&B project " + log.wandb_project : "",
             wandb && log.tensorboard ? ", " : "", log.tensorboard ? "TensorBoard" : "", run_dir);
  return sidecar;
}

MetricsSidecar::MetricsSidecar(std::string run_dir, std::string python, std::string script, int log_fd)
    : run_dir_(std::move(run_dir)),
      python_(std::move(python)),
      script_(std::move(script)),
      log_fd_(log_fd),
      log_echoed_to_(file_size(log_fd)) {}

bool MetricsSidecar::spawn() {
  const std::string parent = std::to_string(getpid());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd_, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd_, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // no descriptor of the run (MPI, checkpoints)
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // SIGTERM is held until the sidecar has its handler (it unblocks it then): a run that ends while Python
  // starts would otherwise kill it before it forwards anything.
  sigset_t held_signals;
  sigemptyset(&held_signals);
  sigaddset(&held_signals, SIGTERM);
  posix_spawnattr_setsigmask(&attributes, &held_signals);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> arguments = {python_, "-u", script_, run_dir_, "--parent-pid", parent};
  std::vector<char*> argv;
  for (std::string& argument : arguments)
    argv.push_back(argument.data());
  argv.push_back(nullptr);
  const int error = posix_spawn(&pid_, python_.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error == 0) return true;
  pid_ = -1;
  fmt::print(
      "warning: metrics sidecar: cannot run {}: {} (the build's Python, scripts/install-deps.sh; or set "
      "NANOFORGE_PYTHON); training goes on without W&B or TensorBoard, metrics.jsonl has every record\n",
      python_, std::strerror(error));
  return false;
}

void MetricsSidecar::echo_warnings() {
  const off_t size = file_size(log_fd_);
  if (size < log_echoed_to_) log_echoed_to_ = size;  // emptied by someone: what comes next is new
  const std::string bytes = read_log(
      log_fd_, log_echoed_to_, std::min<size_t>(kLogReadBytes, static_cast<size_t>(size - log_echoed_to_)));
  const size_t end = bytes.rfind('\n');
  if (end == std::string::npos) {
    if (bytes.size() == kLogReadBytes) log_echoed_to_ += static_cast<off_t>(bytes.size());  // no line: passed
    return;
  }
  log_echoed_to_ += static_cast<off_t>(end + 1);
  for_each_line(std::string_view(bytes).substr(0, end), [](std::string_view line) {
    if (line.starts_with(kWarningPrefix)) fmt::print("{}\n", printable(line));
  });
}

void MetricsSidecar::check() {
  echo_warnings();
  if (pid_ < 0) return;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return;  // still running (or not ours to reap)
  pid_ = -1;
  const std::string log_path = run_dir_ + "/sidecar.log";
  const bool cannot_forward = WIFEXITED(status) && WEXITSTATUS(status) == kCannotForward;
  if (!warned_) {
    fmt::print(
        "warning: metrics sidecar stopped ({}: {}); {}; training goes on, see {}\n", describe_exit(status),
        last_log_line(log_fd_),
        cannot_forward ? "not restarted" : fmt::format("restarting it (at most {} times)", kMaxRestarts),
        log_path);
    warned_ = true;
  }
  if (cannot_forward || restarts_ == kMaxRestarts) return;
  ++restarts_;
  spawn();
}

MetricsSidecar::~MetricsSidecar() {
  echo_warnings();
  close(log_fd_);
  if (pid_ < 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, WNOHANG);  // reaped now if it has already gone; otherwise it finishes on its own
}

}  // namespace nanoforge
