// A whole training run on the CPU, small enough for CI: the committed golden tokenizer, documents of simple
// generated sentences (a distribution a one-layer model can learn in 30 steps), prep, then `run_training`. It
// must learn (validation bits per byte fall clearly), write the documented run directory (config.toml,
// metrics.jsonl, checkpoints), and stop cleanly at --stop-at-step.
#include <cmath>

#include "tests/train/training_fixture.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge {
namespace {

using namespace test;

TEST(TrainingRun, LearnsAndWritesTheRunDirectory) {
  const std::string run = temp_dir("run");
  ASSERT_TRUE(run_training(small_recipe(), stop_at(run, -1)).ok());

  std::vector<double> val_bpb, losses;
  for (const std::string& line : read_lines(run + "/metrics.jsonl")) {
    if (line.find("\"val_bpb\"") != std::string::npos) {
      val_bpb.push_back(number_after(line, "val_bpb"));
    } else if (line.find("\"loss\"") != std::string::npos) {  // not samples or checkpoint times
      losses.push_back(number_after(line, "loss"));
      const double grad_norm = number_after(line, "grad_norm");
      EXPECT_TRUE(std::isfinite(grad_norm) && grad_norm > 0) << line;
      EXPECT_NE(line.find("\"lr_multiplier\""), std::string::npos);
      EXPECT_NE(line.find("\"tokens_per_s\""), std::string::npos);
    }
  }
  ASSERT_EQ(losses.size(), 30u);
  ASSERT_EQ(val_bpb.size(), 3u);  // steps 0, 15, 30
  // At init the model predicts ~uniformly over 2057 ids (3.2 bits per byte here); these sentences follow a
  // few word lists, so 30 steps must cut that by half or more (measured: to ~0.6). A broken gradient or
  // optimizer leaves it nearly flat.
  EXPECT_LT(val_bpb.back(), 0.5 * val_bpb.front()) << val_bpb.front() << " -> " << val_bpb.back();
  EXPECT_LT(losses.back(), losses.front() - 2.0);

  auto resolved = read_recipe(run + "/config.toml");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(recipe_to_toml(*resolved), recipe_to_toml(small_recipe()));
  auto latest = latest_checkpoint(run);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(fs::path(*latest).filename(), "step_000030");
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000015/model.h5"));
  auto state = read_trainer_state(*latest);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->step, 30);
}

TEST(TrainingRun, StopsCleanlyAtTheRequestedStep) {
  const std::string run = temp_dir("stop");
  ASSERT_TRUE(run_training(small_recipe(), stop_at(run, 7)).ok());
  int steps = 0;
  for (const std::string& line : read_lines(run + "/metrics.jsonl"))
    steps += line.find("\"loss\"") != std::string::npos;
  EXPECT_EQ(steps, 7);
  auto latest = latest_checkpoint(run);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(fs::path(*latest).filename(), "step_000007");
}

TEST(TrainingRun, StartsFromGivenWeights) {
  const std::string first = temp_dir("init_source"), second = temp_dir("init_target");
  ASSERT_TRUE(run_training(small_recipe(), stop_at(first, 20)).ok());
  Recipe recipe = small_recipe();
  recipe.model.init_from = first;  // a run directory: its latest checkpoint
  ASSERT_TRUE(run_training(recipe, stop_at(second, 1)).ok());
  auto first_bpb = number_after(read_lines(first + "/metrics.jsonl").front(), "val_bpb");
  auto second_bpb = number_after(read_lines(second + "/metrics.jsonl").front(), "val_bpb");
  EXPECT_LT(second_bpb, 0.5 * first_bpb) << "step-0 val bpb of the second run: weights not loaded?";
  recipe.model.depth = 2;  // another shape
  const absl::Status status = run_training(recipe, stop_at(temp_dir("init_mismatch"), 1));
  EXPECT_NE(status.message().find("model.init_from"), std::string::npos) << status;
}

TEST(TrainingRun, RefusesBadSetupsBeforeTraining) {
  Recipe recipe = small_recipe();
  recipe.train.horizon.total_batch_size = 1000;  // not a multiple of 4 x 64
  absl::Status status = run_training(recipe, stop_at(temp_dir("bad_batch"), -1));
  EXPECT_NE(status.message().find("train.total_batch_size 1000 is not a multiple"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("divides on world sizes none up to 64"), std::string::npos) << status;
  recipe = small_recipe();
  recipe.data.train = "/nonexistent/shards";
  status = run_training(recipe, stop_at(temp_dir("bad_data"), -1));
  EXPECT_NE(status.message().find("data.train"), std::string::npos) << status;
  recipe = small_recipe();
  recipe.data.tokenizer = "/nonexistent/tokenizer";
  status = run_training(recipe, stop_at(temp_dir("bad_tokenizer"), -1));
  EXPECT_NE(status.message().find("data.tokenizer"), std::string::npos) << status;
}

}  // namespace
}  // namespace nanoforge
