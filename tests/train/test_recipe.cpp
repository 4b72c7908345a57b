// Recipes: parsing, overrides, the resolved config round trip, and the errors a user gets for each mistake.
#include <gtest/gtest.h>

#include "train/recipe.h"
#include "train/run_setup.h"

namespace nanoforge {
namespace {

void expect_error(const absl::Status& status, const std::string& fragment) {
  EXPECT_FALSE(status.ok()) << "expected an error mentioning " << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(Recipe, DefaultsAreNanochatsBaseTrain) {
  const Recipe recipe;
  EXPECT_EQ(recipe.model.depth, 20);
  EXPECT_EQ(recipe.model.max_seq_len, 2048);
  EXPECT_EQ(recipe.model.window_pattern, "SSSL");
  EXPECT_EQ(recipe.train.device_batch_size, 32);
  EXPECT_EQ(recipe.train.eval_every, 250);
  EXPECT_EQ(recipe.train.eval_tokens, 80 * 524288);
  EXPECT_EQ(recipe.train.schedule.warmup_steps, 40);
  EXPECT_DOUBLE_EQ(recipe.train.schedule.warmdown_ratio, 0.65);
  EXPECT_DOUBLE_EQ(recipe.optim.matrix_lr, 0.02);
  EXPECT_DOUBLE_EQ(recipe.optim.weight_decay, 0.28);
}

TEST(Recipe, ParsesOverridesAndRoundTripsThroughTheResolvedConfig) {
  auto recipe =
      parse_recipe("[model]\ndepth = 4\n[train]\nnum_iterations = 10\n[optim]\nmatrix_lr = 1\n", "r.toml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->model.depth, 4);
  EXPECT_DOUBLE_EQ(recipe->optim.matrix_lr, 1.0);  // an integer is accepted for a float key
  ASSERT_TRUE(apply_overrides(*recipe, {"train.seed=7", "data.train=/data/my shards",
                                        "model.window_pattern=L", "train.total_batch_size=-1"})
                  .ok());
  EXPECT_EQ(recipe->train.seed, 7);
  EXPECT_EQ(recipe->data.train, "/data/my shards");
  EXPECT_EQ(recipe->model.window_pattern, "L");
  EXPECT_FALSE(recipe->train.deterministic);
  ASSERT_TRUE(apply_overrides(*recipe, {"train.deterministic=true"}).ok());
  EXPECT_TRUE(recipe->train.deterministic);
  auto again = parse_recipe(recipe_to_toml(*recipe), "config.toml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(recipe_to_toml(*again), recipe_to_toml(*recipe));
}

TEST(Recipe, MistakesAreNamed) {
  expect_error(parse_recipe("[train]\ndevice_bach_size = 4\n", "r.toml").status(),
               "r.toml: unknown key train.device_bach_size (did you mean train.device_batch_size?)");
  expect_error(parse_recipe("[train]\ndevice_batch_size = \"4\"\n", "r.toml").status(),
               "train.device_batch_size must be an integer, got a string");
  expect_error(parse_recipe("[training]\nseed = 1\n", "r.toml").status(),
               "[training] is not a recipe section");
  expect_error(parse_recipe("[model\n", "r.toml").status(), "r.toml:1:");
  Recipe recipe;
  expect_error(apply_overrides(recipe, {"train.seed=abc"}), "train.seed must be an integer");
  expect_error(apply_overrides(recipe, {"train.deterministic=1"}),
               "train.deterministic must be a boolean, got an integer");
  expect_error(apply_overrides(recipe, {"seed=3"}), "must look like section.key=value");
  expect_error(apply_overrides(recipe, {"optim.matrx_lr=0.1"}), "did you mean optim.matrix_lr?");
  expect_error(read_recipe("/nonexistent/recipe.toml").status(), "/nonexistent/recipe.toml");
}

// Fuzzing found it: a bare override value with bytes that are not UTF-8 was taken as the string, which the
// resolved config.toml (TOML, UTF-8 only) then wrote as other characters, so a resumed run read another path.
TEST(Recipe, OverrideValuesMustBeUtf8) {
  Recipe recipe;
  expect_error(apply_overrides(recipe, {"data.train=/dat\xff\xff/a"}),
               "override data.train: the value is not valid UTF-8");
  EXPECT_EQ(recipe.data.train, Recipe().data.train);
  ASSERT_TRUE(apply_overrides(recipe, {"data.train=/donn\xc3\xa9es"}).ok());  // UTF-8 beyond ASCII is fine
  const absl::StatusOr<Recipe> resolved = parse_recipe(recipe_to_toml(recipe), "config.toml");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->data.train, "/donn\xc3\xa9es");
}

TEST(Recipe, ValidationNamesTheKeyToFix) {
  Recipe recipe;
  recipe.data = {"a", "b", "c"};
  EXPECT_TRUE(validate_recipe(recipe).ok());
  Recipe bad = recipe;
  bad.train.device_batch_size = 0;
  expect_error(validate_recipe(bad), "train.device_batch_size");
  bad = recipe;
  bad.data.val = "";
  expect_error(validate_recipe(bad), "data.val");
  bad = recipe;
  bad.train.schedule.warmdown_ratio = 1.5;
  expect_error(validate_recipe(bad), "train.warmdown_ratio");
  bad = recipe;
  bad.train.device = "tpu";
  expect_error(validate_recipe(bad), "train.device must be auto, cpu or cuda");
}

}  // namespace
}  // namespace nanoforge
