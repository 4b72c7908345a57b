// CheckpointWriter, prune_checkpoints and the removal of what interrupted saves leave.
#include "train/checkpoint/writer.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <regex>

#include "support/status.h"

namespace nanoforge {
namespace {

// A failed save, said so that the user knows what is still safe and how to go on.
absl::Status save_failed(const std::string& run_dir, int64_t step, const absl::Status& cause) {
  const absl::StatusOr<std::string> latest = latest_checkpoint(run_dir);
  return absl::Status(
      cause.code(),
      fmt::format("checkpoint {} was not saved: {}; the run stops here. {}", checkpoint_name(step),
                  std::string(cause.message()),
                  latest.ok() ? fmt::format("{}/checkpoints/latest still names {}: fix the cause (free disk "
                                            "space?) and continue from it with --resume",
                                            run_dir, std::filesystem::path(*latest).filename().string())
                              : "No earlier checkpoint exists."));
}

}  // namespace

absl::Status prune_checkpoints(const std::string& run_dir, const RetentionPolicy& policy) {
  if (policy.keep_last < 1) return absl::OkStatus();
  namespace fs = std::filesystem;
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const absl::StatusOr<std::string> latest = latest_checkpoint(run_dir);
  const std::regex pattern("step_([0-9]{6,18})");
  std::vector<std::pair<int64_t, fs::path>> steps;
  std::error_code error;
  for (fs::directory_iterator entry(root, error), end; !error && entry != end; entry.increment(error)) {
    std::smatch match;
    const std::string name = entry->path().filename().string();
    std::error_code kind_error;
    if (entry->is_directory(kind_error) && std::regex_match(name, match, pattern))
      steps.emplace_back(std::stoll(match[1]), entry->path());
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& [step, path] = steps[i];
    const bool newest = i + static_cast<size_t>(policy.keep_last) >= steps.size();
    const bool milestone = policy.keep_every > 0 && step % policy.keep_every == 0;
    const bool named_latest = latest.ok() && fs::path(*latest).filename() == path.filename();
    if (newest || milestone || named_latest || step == policy.protected_step) continue;
    fs::remove_all(path, error);
    if (error)
      return absl::InternalError(
          fmt::format("cannot delete old checkpoint {}: {}", path.string(), error.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckpointWriter::save_async(const GPT& model, DataParallelOptimizer& optimizer,
                                          TrainerState trainer) {
  const absl::Status previous = wait();
  NANOFORGE_RETURN_IF_ERROR(optimizer.gather_state(snapshot_.optimizer_state));  // collective: every rank
  // A failed save stops the run: no later checkpoint may be started (the error says which one is `latest`).
  if (!writes_ || !previous.ok()) return previous;
  snapshot_.optimizer_steps = optimizer.steps_taken();
  take_model_snapshot(model, std::move(trainer), snapshot_);
  pending_ = std::async(std::launch::async, [this]() -> absl::Status {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = write_checkpoint(run_dir_, snapshot_);
    if (!status.ok()) status = save_failed(run_dir_, snapshot_.trainer.step, status);
    if (status.ok()) status = prune_checkpoints(run_dir_, retention_);
    last_write_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    last_write_bytes_ = snapshot_.bytes();
    return status;
  });
  return absl::OkStatus();
}

absl::Status CheckpointWriter::wait() {
  if (!pending_.valid()) return absl::OkStatus();
  return pending_.get();
}

absl::Status CheckpointWriter::failed_write() {
  if (!pending_.valid() || pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return absl::OkStatus();
  return pending_.get();
}

absl::StatusOr<std::vector<std::string>> remove_stale_partial_checkpoints(const std::string& run_dir) {
  namespace fs = std::filesystem;
  const std::regex pattern(
      R"((\.step_[0-9]{6,18}\.partial|\.latest\.partial|step_[0-9]{6,18}\.replaced)-([0-9]{1,9}))");
  std::vector<std::string> removed;
  std::error_code error;
  for (fs::directory_iterator entry(fs::path(run_dir) / "checkpoints", error), end; !error && entry != end;
       entry.increment(error)) {
    std::smatch match;
    const std::string name = entry->path().filename().string();
    if (!std::regex_match(name, match, pattern)) continue;
    const auto pid = static_cast<pid_t>(std::stoll(match[2]));
    const bool running = pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM;
    if (running) continue;
    std::error_code remove_error;
    fs::remove_all(entry->path(), remove_error);
    if (remove_error) {
      return absl::PermissionDeniedError(
          fmt::format("cannot remove the stale {}: {}", entry->path().string(), remove_error.message()));
    }
    removed.push_back(name);
  }
  return removed;
}

}  // namespace nanoforge
