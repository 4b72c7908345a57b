// `nanoforge bench scaling --recipe FILE [section.key=value ...] [--steps N] [--warmup W] [--out FILE.json]`,
// run once per world size under mpirun: the recipe's own training loop (no evaluation, samples or
// checkpoints) for W + N steps, and of the last N on rank 0 the median step split into compute, exposed
// communication and data wait; tokens/s in all and per device; with --baseline (the one-device JSON) the
// speedup and efficiency. tools/scaling_report.py turns the JSON files into a table and a plot.
#include <absl/flags/flag.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>

#include "cli/bench/bench_flags.h"
#include "cli/command.h"
#include "cli/common_flags.h"
#include "dist/launch_env.h"
#include "kernels/backend_info.h"
#include "support/status.h"
#include "train/recipe.h"
#include "train/trainer.h"

ABSL_FLAG(std::string, baseline, "",
          "the one-device JSON of this bench (its speedup and efficiency are relative)");

namespace nanoforge {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// tokens_per_s of a previous run's JSON record.
absl::StatusOr<double> baseline_tokens_per_second(const std::string& path) {
  std::ifstream file(path);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::smatch match;
  static const std::regex field("\"tokens_per_s\": ([0-9.eE+-]+)");
  if (!file || !std::regex_search(text, match, field)) {
    return absl::InvalidArgumentError(
        fmt::format("--baseline {}: not a bench scaling JSON record (no \"tokens_per_s\")", path));
  }
  return std::stod(match[1]);
}

absl::Status run_bench_scaling(const std::vector<std::string>& overrides) {
  const std::string recipe_path = absl::GetFlag(FLAGS_recipe);
  const int steps = absl::GetFlag(FLAGS_steps), warmup = absl::GetFlag(FLAGS_warmup);
  if (recipe_path.empty()) return absl::InvalidArgumentError("--recipe is required (see recipes/)");
  if (steps < 1 || warmup < 1) {
    return absl::InvalidArgumentError(
        "--steps and --warmup must be >= 1 (the first step of a process is warm-up)");
  }
  std::optional<double> baseline;
  if (!absl::GetFlag(FLAGS_baseline).empty()) {
    NANOFORGE_ASSIGN_OR_RETURN(baseline, baseline_tokens_per_second(absl::GetFlag(FLAGS_baseline)));
  }
  NANOFORGE_ASSIGN_OR_RETURN(Recipe recipe, load_recipe(recipe_path, overrides));
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = -1;

  NANOFORGE_ASSIGN_OR_RETURN(const LaunchEnv launch, launch_env_from_process());
  TrainRunOptions options;  // a scratch run directory: only rank 0 writes to it (config.toml, metrics.jsonl)
  options.run_dir =
      (std::filesystem::temp_directory_path() / fmt::format("nanoforge_bench_scaling_{}", ::getpid()))
          .string();
  options.stop_at_step = warmup + steps;
  options.checkpoints = false;
  std::vector<StepTiming> timings;
  options.on_step = [&](const StepTiming& timing) { timings.push_back(timing); };
  {
    NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::open(recipe, options));
    NANOFORGE_RETURN_IF_ERROR(trainer->run());
  }  // the run, its communicator and its run directory's lock end here
  if (launch.rank != 0) return absl::OkStatus();
  std::filesystem::remove_all(options.run_dir);
  if (timings.size() != static_cast<size_t>(warmup + steps)) {
    return absl::FailedPreconditionError(
        fmt::format("the recipe's horizon ends after {} steps; --warmup {} + --steps {} need more (set "
                    "train.num_iterations)",
                    timings.size(), warmup, steps));
  }

  std::vector<double> step_s, comm_s, data_s;
  for (size_t i = static_cast<size_t>(warmup); i < timings.size(); ++i) {
    step_s.push_back(timings[i].seconds);
    comm_s.push_back(timings[i].exposed_comm_seconds);
    data_s.push_back(timings[i].data_wait_seconds);
  }
  const double step = median(step_s), comm = median(comm_s), data = median(data_s);
  const double compute = std::max(0.0, step - comm - data);
  const int devices = launch.world_size;
  const double tokens_per_s = static_cast<double>(timings.back().tokens) / step;
  const double speedup = baseline ? tokens_per_s / *baseline : (devices == 1 ? 1.0 : 0.0);
  fmt::print("\nscaling: {} device{}, {} tokens per step, median of {} steps after {} warm-up\n", devices,
             devices > 1 ? "s" : "", timings.back().tokens, steps, warmup);
  fmt::print("  step {:.1f} ms = compute {:.1f} + exposed communication {:.1f} + data wait {:.1f}\n",
             1e3 * step, 1e3 * compute, 1e3 * comm, 1e3 * data);
  fmt::print("  {:.0f} tokens/s, {:.0f} per device\n", tokens_per_s, tokens_per_s / devices);
  if (baseline || devices == 1) {
    fmt::print("  speedup {:.3f}x over one device, efficiency {:.1f}%\n", speedup, 100.0 * speedup / devices);
  }
  std::string json = fmt::format(
      "{{\"bench\": \"scaling\", \"recipe\": \"{}\", \"devices\": {}, \"launcher\": \"{}\", "
      "\"threads_per_rank\": {}, "
      "\"tokens_per_step\": {}, \"steps\": {}, \"step_s\": {:.6f}, \"compute_s\": {:.6f}, "
      "\"exposed_comm_s\": "
      "{:.6f}, \"data_wait_s\": {:.6f}, \"tokens_per_s\": {:.3f}, \"tokens_per_s_per_device\": {:.3f}",
      recipe_path, devices, launcher_name(launch.launcher), backend_info().cpu_threads, timings.back().tokens,
      steps, step, compute, comm, data, tokens_per_s, tokens_per_s / devices);
  if (baseline || devices == 1) {
    json += fmt::format(", \"speedup\": {:.4f}, \"efficiency\": {:.4f}", speedup, speedup / devices);
  }
  json += "}";
  return print_json_record(json);
}

}  // namespace

Command bench_scaling_command() {
  return {"bench scaling",
          "time training steps at this world size (run under mpirun for each size): compute, exposed "
          "communication, data wait, tokens/s, efficiency",
          "--recipe FILE [section.key=value ...] [--steps N] [--warmup W] [--baseline ONE_DEVICE.json] "
          "[--json-out FILE]",
          flag_list({{"recipe"}, kTimingFlags, {"baseline", "json_out"}}),
          run_bench_scaling,
          /*takes_arguments=*/true};
}

}  // namespace nanoforge
