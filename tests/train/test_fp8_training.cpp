// FP8 training on the CPU (recipe model.fp8): recipes/speedrun.toml is nanochat's speedrun line and validates
// (rowwise refused), and a short run of a model wide enough for base_train's filter converts its Linears,
// prints base_train's line, differs from the run without FP8 and tracks it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;

TEST(Fp8Training, SpeedrunRecipeIsNanochatsSpeedrun) {
  const absl::StatusOr<Recipe> recipe = load_recipe(source_path("recipes/speedrun.toml"), {});
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  // runs/speedrun.sh: --depth=24 --target-param-data-ratio=8 --device-batch-size=16 --fp8
  EXPECT_EQ(recipe->model.depth, 24);
  EXPECT_TRUE(recipe->model.fp8);
  EXPECT_EQ(recipe->model.fp8_recipe, "tensorwise");
  EXPECT_EQ(recipe->train.device_batch_size, 16);
  EXPECT_EQ(recipe->train.horizon.target_param_data_ratio, 8);
  EXPECT_EQ(recipe->train.horizon.total_batch_size, -1);  // base_train's power law, as its default
  EXPECT_TRUE(validate_recipe(*recipe).ok()) << validate_recipe(*recipe);
  Recipe rowwise = *recipe;
  rowwise.model.fp8_recipe = "rowwise";
  const absl::Status refused = validate_recipe(rowwise);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("model.fp8_recipe"), std::string::npos) << refused;
}

// Two layers 128 wide (2 heads of 64): every projection, the MLP and lm_head pass base_train's filter.
Recipe fp8_recipe(bool fp8) {
  Recipe recipe = small_recipe();
  recipe.model.depth = 2;
  recipe.train.horizon.num_iterations = 10;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = -1;
  recipe.model.fp8 = fp8;
  return recipe;
}

TEST(Fp8Training, TracksTheRunWithoutFp8) {
  const std::string with = temp_dir("fp8_on"), without = temp_dir("fp8_off");
  ASSERT_TRUE(run_training(fp8_recipe(true), stop_at(with, -1)).ok());
  ASSERT_TRUE(run_training(fp8_recipe(false), stop_at(without, -1)).ok());
  const auto fp8 = losses_by_step(with), full = losses_by_step(without);
  ASSERT_EQ(fp8.size(), 10u);
  ASSERT_EQ(full.size(), 10u);
  int differing = 0;
  for (const auto& [step, loss] : full) {
    const double a = std::stod(fp8.at(step)), b = std::stod(loss);
    differing += a != b;
    // FP8 rounds each GEMM operand to 3 (e4m3) or 2 (e5m2) mantissa bits with one scale per tensor; over
    // sums of >= 128 products the errors mostly average out: measured at most 3.2e-3 of the loss over these
    // 10 steps (growing as the runs' weights part). 1e-2 leaves 3x room; a GEMM fed wrong codes or scales
    // moves the loss by far more (a 2x scale error doubles the logits).
    EXPECT_NEAR(a, b, 1e-2 * std::fabs(b)) << "step " << step;
  }
  EXPECT_GE(differing, 5) << "the FP8 run computed exactly what the run without FP8 did";
}

}  // namespace
}  // namespace nanoforge
