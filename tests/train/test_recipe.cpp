// Recipes: parsing, overrides, the resolved config round trip, the data paths a recipe leaves out (under
// $NANOFORGE_BASE_DIR), and the errors a user gets for each mistake.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "tests/scoped_environment.h"
#include "tests/test_paths.h"
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
  ASSERT_TRUE(apply_overrides(recipe, {"data.train=/donn\u00e9es"}).ok());  // UTF-8 beyond ASCII is fine
  const absl::StatusOr<Recipe> resolved = parse_recipe(recipe_to_toml(recipe), "config.toml");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->data.train, "/donn\u00e9es");
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

// The probe's accepted-silently and crashing values: non-finite rates (a NaN run that then became `latest`),
// 100000 threads (SIGSEGV), sizes whose allocation or arithmetic overflows. Each is refused by key and limit.
TEST(Recipe, EveryValueIsRangeCheckedWithItsKeyAndLimit) {
  Recipe recipe;
  recipe.data = {"a", "b", "c"};
  const std::vector<std::pair<std::function<void(Recipe&)>, std::string>> cases = {
      {[](Recipe& r) { r.optim.matrix_lr = NAN; }, "optim.matrix_lr must be in [0, 1000000], got nan"},
      {[](Recipe& r) { r.optim.embedding_lr = INFINITY; },
       "optim.embedding_lr must be in [0, 1000000], got inf"},
      {[](Recipe& r) { r.optim.weight_decay = NAN; }, "optim.weight_decay"},
      {[](Recipe& r) { r.train.schedule.warmdown_ratio = NAN; }, "train.warmdown_ratio must be in [0, 1]"},
      {[](Recipe& r) { r.train.threads = 100000; },
       "train.threads must be in [0, 1024] (0: all cores), got 100000"},
      {[](Recipe& r) { r.model.depth = 1000000; }, "model.depth must be in [1, 1000]"},
      {[](Recipe& r) { r.model.aspect_ratio = int64_t{1} << 40; },
       "model.aspect_ratio must be in [1, 65536]"},
      {[](Recipe& r) { r.model.depth = 1000, r.model.aspect_ratio = 100; },
       "model.depth x model.aspect_ratio = 100000 (the model's width) exceeds the limit of 65536"},
      {[](Recipe& r) { r.model.max_seq_len = int64_t{1} << 40; },
       "model.max_seq_len must be in [2, 1048576]"},
      {[](Recipe& r) { r.train.device_batch_size = 1000000, r.model.max_seq_len = 4096; },
       "train.device_batch_size x model.max_seq_len = 4096000000 tokens per micro-batch exceeds the limit"},
      {[](Recipe& r) { r.train.eval_tokens = -5; }, "train.eval_tokens must be in [1, "},
      {[](Recipe& r) { r.train.sample_tokens = 1000000; }, "train.sample_tokens must be in [1, 4096]"},
      {[](Recipe& r) { r.train.horizon.target_param_data_ratio = 1e300; }, "train.target_param_data_ratio"},
      {[](Recipe& r) { r.train.horizon.target_flops = NAN; }, "train.target_flops"},
      {[](Recipe& r) { r.train.horizon.num_iterations = -7; }, "train.num_iterations must be in [1, "},
      {[](Recipe& r) { r.dist.timeout_seconds = INFINITY; }, "dist.timeout_seconds"},
  };
  for (const auto& [change, fragment] : cases) {
    Recipe bad = recipe;
    change(bad);
    expect_error(validate_recipe(bad), fragment);
  }
  // In a file or an override: toml's nan and inf are refused where they are read, by key.
  expect_error(parse_recipe("[optim]\nmatrix_lr = nan\n", "r.toml").status(),
               "r.toml: optim.matrix_lr must be a finite number, got nan");
  Recipe overridden;
  expect_error(apply_overrides(overridden, {"optim.scalar_lr=inf"}),
               "optim.scalar_lr must be a finite number");
}

// The probe's `--recipe DIR` read as an empty recipe and complained about batch arithmetic.
TEST(Recipe, ADirectoryIsNotARecipe) {
  const std::string dir = ::testing::TempDir();
  expect_error(read_recipe(dir).status(), "the recipe must be a TOML file, not a directory");
}

// d20.toml and speedrun.toml defaulted to data.tokenizer = "data/tokenizer", a folder of the source tree.
TEST(Recipe, DataPathsLeftOutAreUnderTheBaseDirAndWrittenOnesStayAsWritten) {
  const test::ScopedEnvironment base("NANOFORGE_BASE_DIR", "/data/forge");
  for (const char* shipped : {"d12", "d20", "d26", "speedrun"}) {
    const std::string path = test::source_path(std::string("recipes/") + shipped + ".toml");
    const absl::StatusOr<Recipe> recipe = load_recipe(path, {});
    ASSERT_TRUE(recipe.ok()) << recipe.status();
    EXPECT_EQ(recipe->data.train, "/data/forge/shards") << path;
    EXPECT_EQ(recipe->data.val, "/data/forge/shards") << path;
    EXPECT_EQ(recipe->data.tokenizer, "/data/forge/tokenizer") << path;
  }
  const std::string path = (std::filesystem::temp_directory_path() / "data_paths.toml").string();
  std::ofstream(path) << "[data]\ntrain = \"my/shards\"\n";
  const absl::StatusOr<Recipe> recipe = load_recipe(path, {"data.tokenizer=my/tokenizer"});
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->data.train, "my/shards");  // relative to the current directory, as written
  EXPECT_EQ(recipe->data.val, "/data/forge/shards");
  EXPECT_EQ(recipe->data.tokenizer, "my/tokenizer");
}

TEST(Recipe, WithoutBaseDirOrHomeALeftOutDataPathIsAnErrorNamingBoth) {
  const test::ScopedEnvironment base("NANOFORGE_BASE_DIR", std::nullopt);
  const test::ScopedEnvironment home("HOME", std::nullopt);
  const std::string path = (std::filesystem::temp_directory_path() / "no_data.toml").string();
  std::ofstream(path) << "[model]\ndepth = 4\n";
  expect_error(load_recipe(path, {"data.train=s", "data.val=s"}).status(),
               path + " sets no data.tokenizer, and neither NANOFORGE_BASE_DIR nor HOME is set");
  EXPECT_TRUE(load_recipe(path, {"data.train=s", "data.val=s", "data.tokenizer=t"}).ok());
}

}  // namespace
}  // namespace nanoforge
