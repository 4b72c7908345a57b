// A whole training run on the CPU, small enough for CI: the committed golden tokenizer, documents of simple
// generated sentences (a distribution a one-layer model can learn in 30 steps), prep, then `run_training`. It
// must learn (validation bits per byte fall clearly), write the documented run directory (config.toml,
// metrics.jsonl, checkpoints), and stop cleanly at --stop-at-step.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/prep.h"
#include "support/philox.h"
#include "train/checkpoint.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

const std::string kGolden = NANOFORGE_TOKENIZER_GOLDEN_DIR;

std::string temp_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("nanoforge_train_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);)
    lines.push_back(line);
  return lines;
}

double number_after(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\": ");
  EXPECT_NE(at, std::string::npos) << key << " not in " << line;
  return std::stod(line.substr(at + key.size() + 4));
}

// 400 documents of 4-12 sentences "<Subject> <verb> <object> <ending>." drawn from small word lists.
void write_sentences(const std::string& path) {
  const char* subjects[] = {"The farmer",   "A child",       "The king",
                            "My neighbour", "The old woman", "A soldier"};
  const char* verbs[] = {"found", "carried", "sold", "painted", "watched", "remembered", "lost", "opened"};
  const char* objects[] = {"the red box", "a small boat", "the wooden door",
                           "an apple",    "the letter",   "a map"};
  const char* endings[] = {"in the morning", "after the rain", "near the river", "before dinner",
                           "at the market"};
  const Philox rng(5, Philox::stream_of("sentences"));
  uint64_t draw = 0;
  auto pick = [&](auto& words) { return words[static_cast<size_t>(rng.uniform(draw++) * std::size(words))]; };
  std::ofstream out(path);
  for (int doc = 0; doc < 400; ++doc) {
    const int sentences = 4 + static_cast<int>(rng.uniform(draw++) * 9);
    for (int s = 0; s < sentences; ++s) {
      out << (s ? " " : "") << pick(subjects) << " " << pick(verbs) << " " << pick(objects) << " "
          << pick(endings) << ".";
    }
    out << "\n\n";
  }
}

class TrainingRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = new std::string(temp_dir("data"));
    auto tokenizer = Tokenizer::load(kGolden);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    write_sentences(*data_dir_ + "/sentences.txt");
    PrepOptions options;
    options.inputs = {*data_dir_ + "/sentences.txt"};
    options.out_dir = *data_dir_ + "/shards";
    options.val_docs = 40;
    ASSERT_TRUE(prep_shards(*tokenizer, options).ok());
  }
  static void TearDownTestSuite() { delete data_dir_; }

  static Recipe small_recipe() {
    Recipe recipe;
    recipe.model = {.depth = 1,
                    .aspect_ratio = 64,
                    .head_dim = 64,
                    .max_seq_len = 64,
                    .window_pattern = "L",
                    .init_from = ""};
    recipe.data = {*data_dir_ + "/shards", *data_dir_ + "/shards", kGolden};
    recipe.train.device_batch_size = 4;
    recipe.train.total_batch_size = 512;  // 2 micro-batches of 4 x 64
    recipe.train.num_iterations = 30;
    recipe.train.warmup_steps = 3;
    recipe.train.eval_every = 15;
    recipe.train.eval_tokens = 1024;
    recipe.train.sample_every = 30;
    recipe.train.sample_tokens = 4;
    recipe.train.threads = 2;
    recipe.checkpoint.every = 15;
    // nanochat scales every rate by sqrt(batch / 2^19) = 1/32 at this batch; 8x its base rates make 30 steps
    // enough to see the model learn.
    recipe.optim = {.unembedding_lr = 0.064,
                    .embedding_lr = 2.4,
                    .scalar_lr = 4,
                    .matrix_lr = 0.16,
                    .weight_decay = 0.28};
    return recipe;
  }

  static std::string* data_dir_;
};

std::string* TrainingRunTest::data_dir_ = nullptr;

TEST_F(TrainingRunTest, LearnsAndWritesTheRunDirectory) {
  const std::string run = temp_dir("run");
  ASSERT_TRUE(run_training(small_recipe(), {run, -1}).ok());

  std::vector<double> val_bpb, losses;
  for (const std::string& line : read_lines(run + "/metrics.jsonl")) {
    if (line.find("\"val_bpb\"") != std::string::npos) {
      val_bpb.push_back(number_after(line, "val_bpb"));
    } else {
      losses.push_back(number_after(line, "loss"));
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

TEST_F(TrainingRunTest, StopsCleanlyAtTheRequestedStep) {
  const std::string run = temp_dir("stop");
  ASSERT_TRUE(run_training(small_recipe(), {run, 7}).ok());
  int steps = 0;
  for (const std::string& line : read_lines(run + "/metrics.jsonl"))
    steps += line.find("\"loss\"") != std::string::npos;
  EXPECT_EQ(steps, 7);
  auto latest = latest_checkpoint(run);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(fs::path(*latest).filename(), "step_000007");
}

TEST_F(TrainingRunTest, StartsFromGivenWeights) {
  const std::string first = temp_dir("init_source"), second = temp_dir("init_target");
  ASSERT_TRUE(run_training(small_recipe(), {first, 20}).ok());
  Recipe recipe = small_recipe();
  recipe.model.init_from = first;  // a run directory: its latest checkpoint
  ASSERT_TRUE(run_training(recipe, {second, 1}).ok());
  auto first_bpb = number_after(read_lines(first + "/metrics.jsonl").front(), "val_bpb");
  auto second_bpb = number_after(read_lines(second + "/metrics.jsonl").front(), "val_bpb");
  EXPECT_LT(second_bpb, 0.5 * first_bpb) << "step-0 val bpb of the second run: weights not loaded?";
  recipe.model.depth = 2;  // another shape
  const absl::Status status = run_training(recipe, {temp_dir("init_mismatch"), 1});
  EXPECT_NE(status.message().find("model.init_from"), std::string::npos) << status;
}

TEST_F(TrainingRunTest, RefusesBadSetupsBeforeTraining) {
  Recipe recipe = small_recipe();
  recipe.train.total_batch_size = 1000;  // not a multiple of 4 x 64
  absl::Status status = run_training(recipe, {temp_dir("bad_batch"), -1});
  EXPECT_NE(status.message().find("train.total_batch_size 1000 is not a multiple"), std::string::npos)
      << status;
  recipe = small_recipe();
  recipe.data.train = "/nonexistent/shards";
  status = run_training(recipe, {temp_dir("bad_data"), -1});
  EXPECT_NE(status.message().find("data.train"), std::string::npos) << status;
  recipe = small_recipe();
  recipe.data.tokenizer = "/nonexistent/tokenizer";
  status = run_training(recipe, {temp_dir("bad_tokenizer"), -1});
  EXPECT_NE(status.message().find("data.tokenizer"), std::string::npos) << status;
}

}  // namespace
}  // namespace nanoforge
