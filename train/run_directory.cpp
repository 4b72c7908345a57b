// claim_run_directory: the names nanoforge writes into a run directory (docs/training.md lists them), the
// lock, the run there (checkpoints, trained steps), what a failed start or an interrupted save left, the
// config.
#include "train/run_directory.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "support/output_path.h"
#include "support/status.h"
#include "train/checkpoint/resume.h"
#include "train/checkpoint/writer.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

// The run's files, what `report`, `eval --core --out`, `bench scaling --json-out`, tools/plot_run.py and the
// metrics sidecar write beside them, and the temporary files of the trainer's and the sidecar's rewrites.
constexpr std::string_view kRunDirectoryNames[] = {"config.toml",
                                                   "metrics.jsonl",
                                                   "metrics.jsonl.partial",
                                                   "run.lock",
                                                   "checkpoints",
                                                   "run.png",
                                                   "report.html",
                                                   "core.json",
                                                   "scaling.jsonl",
                                                   "sidecar.log",
                                                   ".sidecar.lock",
                                                   ".sidecar_state.json",
                                                   ".sidecar_state.json.partial",
                                                   "wandb_run_id",
                                                   "wandb",
                                                   "tensorboard"};

bool written_by_nanoforge(const std::string& name) {
  if (std::find(std::begin(kRunDirectoryNames), std::end(kRunDirectoryNames), name) !=
      std::end(kRunDirectoryNames))
    return true;
  // The console's output kept beside the run (`nanoforge train ... | tee RUN/train.log`).
  return name.size() > 4 && name.ends_with(".log");
}

// Whether metrics.jsonl records a trained step ("loss") or a checkpoint ("checkpoint_ms"); a file that
// cannot be read may be a run's, and counts as one.
bool records_a_step(const fs::path& metrics) {
  std::ifstream in(metrics);
  if (!in) return true;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"loss\": ") != std::string::npos || line.find("\"checkpoint_ms\": ") != std::string::npos)
      return true;
  }
  return false;
}

bool directory_has_entries(const fs::path& directory) {
  std::error_code error;
  return fs::is_directory(directory, error) && !fs::is_empty(directory, error);
}

// A new run's directory may hold only names nanoforge writes there. Nothing is created before this check.
absl::Status check_no_foreign_entries(const std::string& run_dir) {
  return check_output_directory_is_own(
      "train", "--run-dir", run_dir, written_by_nanoforge,
      "a new run starts in a new or empty directory or one holding only a run's own files (config.toml, "
      "metrics.jsonl, checkpoints/, ...); give another --run-dir (e.g. runs/NAME)");
}

// Under the lock: refuses a directory that holds a run; removes what a start that trained no step left.
absl::Status prepare_new_run_directory(const std::string& run_dir) {
  const fs::path root(run_dir);
  std::error_code error;
  std::string run;  // what makes the directory a run's, listed
  const auto add = [&run](const std::string& what) { run += (run.empty() ? "" : ", ") + what; };
  if (fs::exists(root / "checkpoints" / "latest", error)) add("checkpoints/latest");
  const size_t checkpoints = checkpoint_directories(run_dir).size();
  if (checkpoints > 0) add(fmt::format("{} checkpoint{}", checkpoints, checkpoints == 1 ? "" : "s"));
  if (run.empty() && directory_has_entries(root / "checkpoints"))
    add("checkpoints/ with what interrupted saves left");
  const bool has_metrics = fs::exists(root / "metrics.jsonl", error);
  if (has_metrics && records_a_step(root / "metrics.jsonl")) add("metrics.jsonl");
  const bool has_config = fs::exists(root / "config.toml", error);
  if (!run.empty()) {
    if (has_config) add("config.toml");
    return absl::AlreadyExistsError(fmt::format(
        "--run-dir {} already holds a run ({}): add --resume to continue it, or give another --run-dir (or "
        "delete this one) to start a new run; nothing was changed",
        run_dir, run));
  }
  // A start that failed before its first step (a failed step-0 evaluation) left its config and at most its
  // step-0 evaluations: nothing a run needs.
  std::vector<std::string> left;
  for (const auto& [name, present] : {std::pair{"config.toml", has_config}, {"metrics.jsonl", has_metrics}}) {
    if (!present) continue;
    if (!fs::remove(root / name, error) && error) {
      return absl::PermissionDeniedError(
          fmt::format("{}/{}: cannot remove what a failed start left: {}", run_dir, name, error.message()));
    }
    left.push_back(name);
  }
  if (!left.empty()) {
    fmt::print("run directory: {} held only what a start that trained no step left ({}): replaced\n", run_dir,
               fmt::join(left, ", "));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunDirLock> claim_run_directory(const std::string& run_dir, bool new_run,
                                               const std::string& config_toml) {
  if (new_run) NANOFORGE_RETURN_IF_ERROR(check_no_foreign_entries(run_dir));
  std::error_code error;
  fs::create_directories(run_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create the run directory: {}", run_dir, error.message()));
  }
  std::string previous_holder;
  NANOFORGE_ASSIGN_OR_RETURN(RunDirLock lock, RunDirLock::acquire(run_dir, &previous_holder));
  if (!previous_holder.empty()) {
    fmt::print("run directory: took over {} from {}, which no longer holds it (it was stopped or killed)\n",
               lock.path(), previous_holder);
  }
  if (new_run) NANOFORGE_RETURN_IF_ERROR(prepare_new_run_directory(run_dir));
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<std::string> stale, remove_stale_partial_checkpoints(run_dir));
  for (const std::string& name : stale)
    fmt::print("checkpoints: removed {}, left by a save that was interrupted\n", name);
  const std::string config_path = run_dir + "/config.toml";
  std::ofstream config(config_path);
  config << config_toml;
  if (!config) return absl::PermissionDeniedError(fmt::format("{}: cannot write", config_path));
  return lock;
}

}  // namespace nanoforge
