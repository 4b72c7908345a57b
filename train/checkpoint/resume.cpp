// Resume: checkpoint choice, recipe compatibility, metrics trimming.
#include "train/checkpoint/resume.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "train/checkpoint/checkpoint.h"

namespace nanoforge {
namespace {

// Keys whose change would make the saved state mean something else.
bool must_match(const std::string& key) {
  return (key.rfind("model.", 0) == 0 && key != "model.init_from") || key == "train.seed";
}

}  // namespace

std::vector<std::pair<int64_t, std::string>> checkpoint_directories(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> steps;
  const std::regex pattern("step_([0-9]{6,18})");
  std::error_code error;
  for (fs::directory_iterator entry(fs::path(run_dir) / "checkpoints", error), end; !error && entry != end;
       entry.increment(error)) {
    std::smatch match;
    const std::string name = entry->path().filename().string();
    std::error_code kind_error;
    if (entry->is_directory(kind_error) && std::regex_match(name, match, pattern))
      steps.emplace_back(std::stoll(match[1]), entry->path().string());
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::Status check_resume_from_exists(const std::string& checkpoint, const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_directory(checkpoint, error)) return absl::OkStatus();
  const std::string what = fs::exists(checkpoint, error) ? "is not a directory" : "does not exist";
  std::vector<std::string> names;
  for (const auto& [step, path] : checkpoint_directories(run_dir))
    names.push_back(fs::path(path).filename().string());
  const std::string available =
      names.empty() ? fmt::format("{} has no checkpoint", run_dir)
                    : fmt::format("the checkpoints of {} are {} (--resume takes the newest that verifies)",
                                  run_dir, fmt::join(names, ", "));
  return absl::NotFoundError(fmt::format("--resume-from {}: {}; {}", checkpoint, what, available));
}

absl::StatusOr<std::string> newest_valid_checkpoint(const std::string& run_dir,
                                                    std::vector<std::string>* skipped) {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  absl::StatusOr<std::string> latest = latest_checkpoint(run_dir);
  if (latest.ok()) {
    candidates.push_back(*latest);
  } else if (!absl::IsNotFound(latest.status()) && skipped != nullptr) {
    skipped->push_back(std::string(latest.status().message()));
  }
  const std::vector<std::pair<int64_t, std::string>> steps = checkpoint_directories(run_dir);
  for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
    if (std::find(candidates.begin(), candidates.end(), step->second) == candidates.end())
      candidates.push_back(step->second);
  }
  for (const std::string& candidate : candidates) {
    const absl::Status status = verify_checkpoint(candidate);
    if (status.ok()) return candidate;
    if (skipped != nullptr)
      skipped->push_back(fmt::format("{}: {}", candidate, std::string(status.message())));
  }
  if (candidates.empty() && absl::IsNotFound(latest.status()))
    return absl::NotFoundError(fmt::format("{}: no checkpoint to resume from (none was written)", run_dir));
  return absl::DataLossError(
      fmt::format("{}: no valid checkpoint to resume from: every one is damaged (listed above); start a new "
                  "run directory, "
                  "or repair or remove the damaged checkpoints",
                  run_dir));
}

absl::StatusOr<std::vector<std::string>> resume_changes(const Recipe& saved, const Recipe& current) {
  const std::vector<RecipeKey> before = recipe_keys(saved), after = recipe_keys(current);
  std::vector<std::string> changes;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].value == after[i].value) continue;
    if (must_match(before[i].name)) {
      return absl::FailedPreconditionError(fmt::format(
          "{} was {} in the checkpoint and is {} now: resuming would not continue the same run; start a new "
          "run directory (model.init_from can start from the checkpoint's weights)",
          before[i].name, before[i].value, after[i].value));
    }
    changes.push_back(fmt::format("{}: {} -> {}", before[i].name, before[i].value, after[i].value));
  }
  return changes;
}

absl::Status trim_metrics_after(const std::string& metrics_path, int64_t step) {
  std::ifstream in(metrics_path);
  if (!in) return absl::OkStatus();  // nothing written yet
  const std::regex step_field("\"step\": ([0-9]{1,18})");
  std::string kept, line;
  while (std::getline(in, line)) {
    std::smatch match;
    if (!std::regex_search(line, match, step_field)) continue;
    const int64_t line_step = std::stoll(match[1]);
    const bool evaluation = line.find("\"val_bpb\"") != std::string::npos;
    if (evaluation ? line_step < step : line_step <= step) kept += line + "\n";
  }
  in.close();
  const std::string temporary = metrics_path + ".partial";
  {
    std::ofstream out(temporary);
    out << kept;
    if (!out) return absl::DataLossError(fmt::format("{}: cannot rewrite the metrics", temporary));
  }
  std::error_code error;
  std::filesystem::rename(temporary, metrics_path, error);
  if (error) return absl::InternalError(fmt::format("cannot replace {}: {}", metrics_path, error.message()));
  return absl::OkStatus();
}

}  // namespace nanoforge
