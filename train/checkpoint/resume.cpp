// Resume: checkpoint choice, recipe and data compatibility, metrics trimming, and the state loaded.
#include "train/checkpoint/resume.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "support/status.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge {
namespace {

// Keys whose change would make the saved state mean something else.
bool must_match(const std::string& key) {
  return (key.rfind("model.", 0) == 0 && key != "model.init_from") || key == "train.seed";
}

// The checkpoint's tokenizer and training data against this run's: what changed ("the tokenizer: ..."),
// refused unless --allow-data-change. A checkpoint without a data manifest hash cannot tell (the loader's
// fingerprint still refuses other shards when it restores its state).
absl::StatusOr<std::vector<std::string>> check_resume_data(const std::string& checkpoint,
                                                           const TrainerState& state, const RunSetup& setup,
                                                           bool allow_data_change) {
  std::vector<std::string> changes;
  if (state.tokenizer_hash != setup.tokenizer.hash()) {
    changes.push_back(
        fmt::format("tokenizer: the checkpoint was trained with tokenizer {}, data.tokenizer ({}) is {}",
                    state.tokenizer_hash, setup.recipe.data.tokenizer, setup.tokenizer.hash()));
  }
  if (!state.data_manifest_hash.empty() && state.data_manifest_hash != setup.train_manifest_hash) {
    changes.push_back(fmt::format(
        "training data: the checkpoint was trained on the data set whose manifest hash is {}, "
        "data.train ({}) "
        "{}",
        state.data_manifest_hash, setup.recipe.data.train,
        setup.train_manifest_hash.empty() ? std::string("has no manifest")
                                          : fmt::format("has manifest hash {}", setup.train_manifest_hash)));
  }
  if (!changes.empty() && !allow_data_change) {
    return absl::FailedPreconditionError(fmt::format(
        "{} cannot be resumed on this data: the {}. Resume with the data it was trained on, or add "
        "--allow-data-change to continue on the new data (the data loader then starts it from its beginning)",
        checkpoint, fmt::join(changes, "; the ")));
  }
  return changes;
}

// The model and the steps: the checkpoint's model must be this run's, and its step within the run.
absl::Status check_resume_steps(const std::string& checkpoint, const TrainerState& state,
                                const RunSetup& setup, int64_t stop_at_step) {
  NANOFORGE_ASSIGN_OR_RETURN(const GPTConfig stored, read_checkpoint_config(checkpoint));
  if (stored.describe() != setup.model.describe()) {
    return absl::FailedPreconditionError(fmt::format("{}/model.h5 holds a model with {}, this run builds {}",
                                                     checkpoint, stored.describe(), setup.model.describe()));
  }
  const int64_t num_iterations = setup.horizon.num_iterations;
  if (state.step > num_iterations) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is at step {}, beyond the run's {} steps (train.num_iterations): raise train.num_iterations to "
        "train on from it (an allowed change), or resume an earlier checkpoint with --resume-from",
        checkpoint, state.step, num_iterations));
  }
  if (stop_at_step > 0 && stop_at_step <= state.step) {
    return absl::InvalidArgumentError(
        fmt::format("--stop-at-step {} is not after the step {} of {}; give a later "
                    "step",
                    stop_at_step, state.step, checkpoint));
  }
  return absl::OkStatus();
}

// The data stream where the checkpoint left it (with --allow-data-change, from the new data's beginning when
// the saved position does not fit it).
absl::StatusOr<std::unique_ptr<Loader>> resume_train_loader(const std::string& checkpoint,
                                                            const TrainerState& state, const RunSetup& setup,
                                                            bool allow_data_change, int64_t rank) {
  NANOFORGE_ASSIGN_OR_RETURN(const LoaderState loader_state, LoaderState::from_bytes(state.loader_state));
  const LoaderOptions train_options{setup.device_batch_size, setup.model.sequence_len, rank, setup.world_size,
                                    static_cast<uint64_t>(setup.recipe.train.seed)};
  absl::StatusOr<std::unique_ptr<Loader>> loader =
      Loader::create(setup.train_data, train_options, &loader_state);
  if (!loader.ok() && allow_data_change) {
    if (rank == 0) {
      fmt::print(
          "resume: --allow-data-change: the data loader starts the training data from its beginning "
          "({})\n",
          std::string(loader.status().message()));
    }
    loader = Loader::create(setup.train_data, train_options);
  }
  if (!loader.ok()) {
    return absl::Status(loader.status().code(), fmt::format("resuming the data stream of {}: {}", checkpoint,
                                                            std::string(loader.status().message())));
  }
  return std::move(*loader);
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

absl::StatusOr<DroppedSteps> trim_metrics_after(const std::string& metrics_path, int64_t step) {
  DroppedSteps dropped;
  std::ifstream in(metrics_path);
  if (!in) return dropped;  // nothing written yet
  const std::regex step_field("\"step\": ([0-9]{1,18})");
  const std::regex step_ms_field("\"step_ms\": ([-+.0-9eE]+)");  // as metric_json writes it (%.9g)
  std::string kept, line;
  while (std::getline(in, line)) {
    std::smatch match;
    if (!std::regex_search(line, match, step_field)) continue;
    const int64_t line_step = std::stoll(match[1]);
    const bool evaluation = line.find("\"val_bpb\"") != std::string::npos;
    if (evaluation ? line_step < step : line_step <= step) {
      kept += line + "\n";
    } else if (line.find("\"loss\"") != std::string::npos) {  // a training step's record
      ++dropped.steps;
      if (std::regex_search(line, match, step_ms_field))
        dropped.seconds += std::strtod(match[1].str().c_str(), nullptr) / 1e3;
    }
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
  return dropped;
}

absl::StatusOr<std::string> agreed_resume_checkpoint(const TrainRunOptions& options, int64_t rank,
                                                     int64_t world_size, const SumOverRanks& sum_over_ranks) {
  if (!options.resume && options.resume_from.empty()) return std::string();
  // Every rank must start from rank 0's checkpoint: agreed before any rank loads or writes anything.
  const bool chief = rank == 0;
  const ResumeChoice choice = choose_resume_checkpoint(options.run_dir, options.resume_from, chief);
  NANOFORGE_RETURN_IF_ERROR(agree_on_resume_checkpoint(choice, options.run_dir, options.resume_from, rank,
                                                       world_size, sum_over_ranks));
  if (choice.checkpoint.empty()) {
    // Killed before its first checkpoint (a requeued job resumes blindly): the run starts over.
    if (chief) fmt::print("resume: {} has no checkpoint yet; starting from step 0\n", options.run_dir);
    if (chief) NANOFORGE_RETURN_IF_ERROR(trim_metrics_after(options.run_dir + "/metrics.jsonl", 0).status());
  }
  return choice.checkpoint;
}

absl::StatusOr<ResumedRun> resume_from_checkpoint(const std::string& checkpoint, const RunSetup& setup,
                                                  const TrainRunOptions& options, int64_t rank, GPT& model,
                                                  DataParallelOptimizer& optimizer) {
  NANOFORGE_ASSIGN_OR_RETURN(const TrainerState state, read_trainer_state(checkpoint));
  NANOFORGE_ASSIGN_OR_RETURN(const Recipe saved,
                             parse_recipe(state.recipe_toml, checkpoint + "/trainer.h5 recipe"));
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<std::string> changes, resume_changes(saved, setup.recipe));
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<std::string> data_changes,
                             check_resume_data(checkpoint, state, setup, options.allow_data_change));
  NANOFORGE_RETURN_IF_ERROR(check_resume_steps(checkpoint, state, setup, options.stop_at_step));
  // Every rank reads the checkpoint (a multi-node run keeps its run directory where all nodes see it) and
  // keeps its own share of the optimizer state, whatever the world size that wrote it.
  NANOFORGE_RETURN_IF_ERROR(load_model_weights(checkpoint, model));
  model.refresh_compute_weights();
  NANOFORGE_ASSIGN_OR_RETURN(const int64_t optimizer_steps, read_optimizer_steps(checkpoint));
  NANOFORGE_RETURN_IF_ERROR(
      optimizer.load_state([&](const std::string& dataset,
                               int64_t numel) { return read_optimizer_tensor(checkpoint, dataset, numel); },
                           optimizer_steps));
  ResumedRun resumed{state.step, state.training_seconds, nullptr, {}};
  NANOFORGE_ASSIGN_OR_RETURN(resumed.train_loader,
                             resume_train_loader(checkpoint, state, setup, options.allow_data_change, rank));
  if (rank != 0) return resumed;
  NANOFORGE_ASSIGN_OR_RETURN(resumed.redone,
                             trim_metrics_after(options.run_dir + "/metrics.jsonl", state.step));
  fmt::print(
      "resume: {} at step {}{}\n", checkpoint, state.step,
      state.step == setup.horizon.num_iterations ? " (the run is complete: nothing left to train)" : "");
  for (const std::string& change : changes)
    fmt::print("resume: recipe changed: {}\n", change);
  for (const std::string& change : data_changes)
    fmt::print("resume: --allow-data-change: continuing on changed {}\n", change);
  if (state.data_manifest_hash.empty() && !setup.train_manifest_hash.empty()) {
    fmt::print(
        "resume: {} records no data manifest (written before nanoforge recorded one): the training "
        "data is checked by the data loader's fingerprint only\n",
        checkpoint);
  }
  return resumed;
}

}  // namespace nanoforge
