// CORE during training (train.core_every): due steps and the last one write core_metric and each task's
// centred accuracy to metrics.jsonl and a console line, and the last value is what `nanoforge eval --core`
// gives for the run's final checkpoint; bad train.core_* settings stop the run before it starts.
#include <gtest/gtest.h>

#include "tests/eval/core/core_test_support.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;

TEST(CoreTraining, CoreEveryLogsAndMatchesEvalOfTheFinalCheckpoint) {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = 20;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = -1;
  recipe.train.core = {.every = 15, .bundle = kCoreBundle, .max_per_task = 12};
  const std::string dir = temp_dir("core_every");
  const ProgramRun run = run_command(fmt::format("{} train --recipe {} --run-dir {}/run 2>&1",
                                                 test::nanoforge_binary(), recipe_file(recipe, dir), dir));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_PRED2(contains, run.output, "step 00015 | CORE ");
  EXPECT_PRED2(contains, run.output, "step 00020 | CORE ");
  std::vector<std::pair<int64_t, double>> core;
  for (const std::string& line : read_lines(dir + "/run/metrics.jsonl")) {
    if (!contains(line, "\"core_metric\"")) continue;
    core.emplace_back(static_cast<int64_t>(number_after(line, "step")), number_after(line, "core_metric"));
    EXPECT_PRED2(contains, line, "\"core/lm_tenshot\": ");  // a centred accuracy per task
  }
  ASSERT_EQ(core.size(), 2u);
  EXPECT_EQ(core[0].first, 15);
  EXPECT_EQ(core[1].first, 20);

  const ProgramRun eval = run_command(fmt::format(
      "{} eval --core {} --checkpoint {}/run --max-per-task 12 --out {}/core.json --threads 1 2>&1",
      test::nanoforge_binary(), kCoreBundle, dir, dir));
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const std::string record = last_line(eval.output);
  // metrics.jsonl keeps 9 significant digits.
  EXPECT_NEAR(number_after(record, "core_metric"), core[1].second, 1e-8 + 1e-8 * std::abs(core[1].second));
}

TEST(CoreTraining, BadCoreSettingsStopBeforeTheRun) {
  Recipe recipe = small_recipe();
  recipe.train.core.bundle = kCoreBundle;
  recipe.train.core.every = 0;
  const std::string dir = temp_dir("core_bad");
  absl::Status status = run_training(recipe, stop_at(dir + "/run", 1));
  EXPECT_PRED2(contains, std::string(status.message()), "train.core_every must be > 0 or -1");
  recipe.train.core.every = 10;
  recipe.train.core.max_per_task = 0;
  status = run_training(recipe, stop_at(dir + "/run", 1));
  EXPECT_PRED2(contains, std::string(status.message()), "train.core_max_per_task must be > 0 or -1");
  recipe.train.core.max_per_task =
      4;  // below mc_tenshot's 10 shots + 1: refused before the run, not at step 10
  status = run_training(recipe, stop_at(dir + "/run", 1));
  EXPECT_PRED2(contains, std::string(status.message()),
               "train.core_max_per_task 4 is too few for 3 tasks of " + std::string(kCoreBundle));
  EXPECT_PRED2(contains, std::string(status.message()), "give train.core_max_per_task 11 or more");
  recipe.train.core.max_per_task = 5;
  recipe.train.core.bundle = dir + "/no_bundle";
  status = run_training(recipe, stop_at(dir + "/run", 1));
  EXPECT_PRED2(contains, std::string(status.message()), "train.core_bundle: " + dir + "/no_bundle/core.yaml");
  EXPECT_FALSE(std::filesystem::exists(dir + "/run/metrics.jsonl"));
}

}  // namespace
}  // namespace nanoforge
