// Rank 0's metrics sidecar: tools/metrics_sidecar.py, started with the build's Python, follows metrics.jsonl
// and forwards it to Weights & Biases and TensorBoard (the log.* recipe keys). The trainer never waits on it:
// no pipe joins them, it is only looked at (waitpid without blocking, and the warnings it appended to
// RUN_DIR/sidecar.log, repeated on the console) between steps, restarted a few times if it dies, and told
// with SIGTERM when the run ends; a missing Python or package, or a sidecar.log that is not a plain file, is
// one warning line.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "train/recipe.h"

namespace nanoforge {

class MetricsSidecar {
 public:
  // The sidecar of `run_dir` (whose config.toml it reads) when `log` asks for W&B or TensorBoard, else null.
  // NANOFORGE_PYTHON and NANOFORGE_METRICS_SIDECAR override the interpreter and the script.
  static std::unique_ptr<MetricsSidecar> start_if_asked(const Recipe::Log& log, const std::string& run_dir);
  MetricsSidecar(const MetricsSidecar&) = delete;
  MetricsSidecar& operator=(const MetricsSidecar&) = delete;
  // Tells the sidecar the run has ended: it forwards what is left and exits by itself.
  ~MetricsSidecar();

  // Between steps: repeats the sidecar's new warnings, and restarts a sidecar that has exited, at most
  // kMaxRestarts times (one warning line).
  void check();

  static constexpr int kMaxRestarts = 3;

 private:
  MetricsSidecar(std::string run_dir, std::string python, std::string script, int log_fd);
  bool spawn();  // false (and a warning printed) when the interpreter cannot be started
  // Prints the "warning: metrics sidecar" lines appended to the log since the last call (a bounded read).
  void echo_warnings();

  std::string run_dir_, python_, script_;
  int log_fd_;           // RUN_DIR/sidecar.log, the sidecar's stdout and stderr
  off_t log_echoed_to_;  // the log's bytes before this offset have been looked at (or were there before)
  pid_t pid_ = -1;       // -1: not running
  int restarts_ = 0;
  bool warned_ = false;
};

// This build's Python environment and tools/metrics_sidecar.py, written at configure time into one generated
// file (train/sidecar_paths.cpp.in) so that no compile line holds the clone's path.
const char* configured_python();
const char* configured_sidecar_script();

}  // namespace nanoforge
