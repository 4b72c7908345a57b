// CheckpointWriter and prune_checkpoints.
#include "train/checkpoint/writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>

#include "support/status.h"

namespace nanoforge {

absl::Status prune_checkpoints(const std::string& run_dir, const RetentionPolicy& policy) {
  if (policy.keep_last < 1) return absl::OkStatus();
  namespace fs = std::filesystem;
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const absl::StatusOr<std::string> latest = latest_checkpoint(run_dir);
  const std::regex pattern("step_([0-9]{6,})");
  std::vector<std::pair<int64_t, fs::path>> steps;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(name, match, pattern))
      steps.emplace_back(std::stoll(match[1]), entry.path());
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
  absl::Status previous = wait();
  NANOFORGE_RETURN_IF_ERROR(optimizer.gather_state(snapshot_.optimizer_state));
  if (!writes_) return previous;
  snapshot_.optimizer_steps = optimizer.steps_taken();
  take_model_snapshot(model, std::move(trainer), snapshot_);
  pending_ = std::async(std::launch::async, [this]() -> absl::Status {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = write_checkpoint(run_dir_, snapshot_);
    if (status.ok()) status = prune_checkpoints(run_dir_, retention_);
    last_write_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    last_write_bytes_ = snapshot_.bytes();
    return status;
  });
  return previous;
}

absl::Status CheckpointWriter::wait() {
  if (!pending_.valid()) return absl::OkStatus();
  return pending_.get();
}

}  // namespace nanoforge
