// `nanoforge train --recipe FILE --run-dir DIR [section.key=value ...] [--stop-at-step N]`: reads the recipe,
// applies the overrides, opens the run (every check first) and runs its loop (train/trainer.h).
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "support/status.h"
#include "train/recipe.h"
#include "train/trainer.h"

ABSL_FLAG(std::string, run_dir, "", "run directory: config.toml, metrics.jsonl, checkpoints/");
ABSL_FLAG(int64_t, stop_at_step, -1,
          "stop cleanly with a checkpoint after this step (the schedule is unchanged)");
NANOFORGE_FLAG_LIMIT(stop_at_step, 1, 1e12, "(a step to stop after)", -1);
ABSL_FLAG(bool, allow_data_change, false,
          "with --resume: continue on other data or another tokenizer than the checkpoint was trained on "
          "(refused otherwise, naming what changed); the data loader then starts the new data from its "
          "beginning");
ABSL_FLAG(std::string, resume_from, "", "continue from this checkpoint directory");

namespace nanoforge {
namespace {

absl::Status run_train_command(const std::vector<std::string>& overrides) {
  const std::string recipe_path = absl::GetFlag(FLAGS_recipe), run_dir = absl::GetFlag(FLAGS_run_dir);
  if (recipe_path.empty() || run_dir.empty()) {
    return absl::InvalidArgumentError(
        "--recipe and --run-dir are both required (see nanoforge train --help)");
  }
  NANOFORGE_ASSIGN_OR_RETURN(Recipe recipe, load_recipe(recipe_path, overrides));
  TrainRunOptions options;
  options.run_dir = run_dir;
  options.stop_at_step = absl::GetFlag(FLAGS_stop_at_step);
  options.resume = absl::GetFlag(FLAGS_resume);
  options.resume_from = absl::GetFlag(FLAGS_resume_from);
  options.allow_data_change = absl::GetFlag(FLAGS_allow_data_change);
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::open(recipe, options));
  return trainer->run();
}

std::string recipe_help() {
  std::string text = "\nrecipe keys (set in the file or as section.key=value after the flags):\n";
  for (const RecipeKey& key : recipe_keys(Recipe{})) {
    text += fmt::format("  {:<32} {:<8} default {:<14} {}\n", key.name, key.type, key.value, key.help);
  }
  return text;
}

}  // namespace

Command train_command() {
  return {"train",
          "pretrain a model from a recipe",
          "--recipe FILE --run-dir DIR [section.key=value ...] [--stop-at-step N] [--resume | --resume-from "
          "CKPT] [--allow-data-change]" +
              recipe_help(),
          {"recipe", "run_dir", "stop_at_step", "resume", "resume_from", "allow_data_change"},
          run_train_command,
          /*takes_arguments=*/true};
}

}  // namespace nanoforge
