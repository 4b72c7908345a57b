// MetricsSidecar: posix_spawn of the build's Python on tools/metrics_sidecar.py, in a process group of its
// own (Ctrl-C is the trainer's to handle), with stdin from /dev/null and its output appended to
// RUN_DIR/sidecar.log, so nothing it does can block the trainer. Exit status 3 means it has nothing it can
// forward (a package missing, W&B refusing): it is not restarted then.
#include "train/metrics_sidecar.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

extern char** environ;

namespace nanoforge {
namespace {

constexpr int kCannotForward = 3;  // tools/metrics_sidecar.py's CANNOT_FORWARD

std::string setting(const char* variable, const char* configured) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : configured;
}

// The last line the sidecar wrote, to say in the warning why it stopped.
std::string last_log_line(const std::string& path) {
  std::ifstream file(path);
  std::string line, last;
  while (std::getline(file, line)) {
    if (!line.empty()) last = line;
  }
  return last.empty() ? "no output" : last;
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
  std::unique_ptr<MetricsSidecar> sidecar(
      new MetricsSidecar(run_dir, setting("NANOFORGE_PYTHON", configured_python()),
                         setting("NANOFORGE_METRICS_SIDECAR", configured_sidecar_script())));
  if (!sidecar->spawn()) return nullptr;
  fmt::print("metrics sidecar: pid {} forwards metrics.jsonl ({}{}{}); its output goes to {}/sidecar.log\n",
             sidecar->pid_, wandb ? "W&B project " + log.wandb_project : "",
             wandb && log.tensorboard ? ", " : "", log.tensorboard ? "TensorBoard" : "", run_dir);
  return sidecar;
}

bool MetricsSidecar::spawn() {
  const std::string log_path = run_dir_ + "/sidecar.log", parent = std::to_string(getpid());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // no descriptor of the run (MPI, checkpoints)
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  posix_spawnattr_setsigmask(&attributes, &no_signals);
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

void MetricsSidecar::check() {
  if (pid_ < 0) return;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return;  // still running (or not ours to reap)
  pid_ = -1;
  const std::string log_path = run_dir_ + "/sidecar.log";
  const bool cannot_forward = WIFEXITED(status) && WEXITSTATUS(status) == kCannotForward;
  if (!warned_) {
    fmt::print(
        "warning: metrics sidecar stopped ({}: {}); {}; training goes on, see {}\n", describe_exit(status),
        last_log_line(log_path),
        cannot_forward ? "not restarted" : fmt::format("restarting it (at most {} times)", kMaxRestarts),
        log_path);
    warned_ = true;
  }
  if (cannot_forward || restarts_ == kMaxRestarts) return;
  ++restarts_;
  spawn();
}

MetricsSidecar::~MetricsSidecar() {
  if (pid_ < 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, WNOHANG);  // reaped now if it has already gone; otherwise it finishes on its own
}

}  // namespace nanoforge
