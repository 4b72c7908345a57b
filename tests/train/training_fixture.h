// What the training tests share: a small learnable corpus (generated sentences, tokenized with the committed
// golden tokenizer into shards once per test binary), a one-layer recipe over it, file helpers, and readers
// of what a run leaves behind (losses by step, final weights).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/prep/prep.h"
#include "h5/file.h"
#include "support/philox.h"
#include "tests/test_paths.h"
#include "train/checkpoint/checkpoint.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace nanoforge::test {

namespace fs = std::filesystem;

inline const std::string kGolden = source_path("tests/data/tokenizer/golden");

inline std::string temp_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("nanoforge_train_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);)
    lines.push_back(line);
  return lines;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

inline double number_after(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\": ");
  EXPECT_NE(at, std::string::npos) << key << " not in " << line;
  return at == std::string::npos ? 0 : std::stod(line.substr(at + key.size() + 4));
}

// 400 documents of 4-12 sentences "<Subject> <verb> <object> <ending>." drawn from small word lists.
inline void write_sentences(const std::string& path) {
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

// The shards of the sentences (written on first use).
inline const std::string& sentence_shards() {
  static const std::string dir = [] {
    const std::string root = temp_dir("data");
    write_sentences(root + "/sentences.txt");
    auto tokenizer = Tokenizer::load(kGolden);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    PrepOptions options;
    options.inputs = {root + "/sentences.txt"};
    options.out_dir = root + "/shards";
    options.val_docs = 40;
    EXPECT_TRUE(prep_shards(*tokenizer, options).ok());
    return options.out_dir;
  }();
  return dir;
}

// A one-layer model over the sentences: 30 steps of 2 micro-batches of 4 x 64 tokens.
inline Recipe small_recipe() {
  Recipe recipe;
  static_cast<ModelSizing&>(recipe.model) = {
      .depth = 1, .aspect_ratio = 64, .head_dim = 64, .max_seq_len = 64, .window_pattern = "L"};
  recipe.data = {sentence_shards(), sentence_shards(), kGolden};
  recipe.train.device_batch_size = 4;
  recipe.train.horizon.total_batch_size = 512;
  recipe.train.horizon.num_iterations = 30;
  recipe.train.schedule.warmup_steps = 3;
  recipe.train.eval_every = 15;
  recipe.train.eval_tokens = 1024;
  recipe.train.sample_every = 30;
  recipe.train.sample_tokens = 4;
  recipe.train.threads = 1;     // ctest runs tests side by side: one thread each, no oversubscription
  recipe.train.device = "cpu";  // the bitwise checks are the CPU backend's (GPU runs: tests/train GPU test)
  recipe.checkpoint.every = 15;
  // nanochat scales every rate by sqrt(batch / 2^19) = 1/32 at this batch; 8x its base rates make 30 steps
  // enough to see the model learn.
  recipe.optim = {
      .unembedding_lr = 0.064, .embedding_lr = 2.4, .scalar_lr = 4, .matrix_lr = 0.16, .weight_decay = 0.28};
  return recipe;
}

// What `nanoforge train` does with the recipe and its options (cli/commands/train.cpp).
inline absl::Status run_training(const Recipe& recipe, const TrainRunOptions& options) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::open(recipe, options);
  if (!trainer.ok()) return trainer.status();
  return (*trainer)->run();
}

inline TrainRunOptions stop_at(std::string run_dir, int64_t step) {
  TrainRunOptions options;
  options.run_dir = std::move(run_dir);
  options.stop_at_step = step;
  return options;
}

// Every training record's "loss" field as printed (%.9g), by step.
inline std::map<int64_t, std::string> losses_by_step(const std::string& run_dir) {
  std::map<int64_t, std::string> losses;
  for (const std::string& line : read_lines(run_dir + "/metrics.jsonl")) {
    const size_t at = line.find("\"loss\": ");
    if (at == std::string::npos) continue;
    const int64_t step = static_cast<int64_t>(number_after(line, "step"));
    EXPECT_EQ(losses.count(step), 0u) << "step " << step << " recorded twice in " << run_dir;
    losses[step] = line.substr(at + 8, line.find(',', at) - at - 8);
  }
  return losses;
}

// The final model's weights, bytes of every dataset, for bitwise comparison.
// The weights of one checkpoint directory, by name.
inline std::map<std::string, std::vector<float>> checkpoint_weights(const std::string& checkpoint_dir) {
  auto file = H5File::open_read(checkpoint_dir + "/model.h5");
  EXPECT_TRUE(file.ok()) << file.status();
  std::map<std::string, std::vector<float>> weights;
  if (!file.ok()) return weights;
  const absl::StatusOr<std::vector<std::string>> names = file->members("/weights");
  EXPECT_TRUE(names.ok());
  for (const std::string& name : *names)
    weights[name] = file->read<float>("/weights/" + name)->values;
  return weights;
}

inline std::map<std::string, std::vector<float>> final_weights(const std::string& run_dir) {
  auto checkpoint = latest_checkpoint(run_dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  return checkpoint.ok() ? checkpoint_weights(*checkpoint) : std::map<std::string, std::vector<float>>{};
}

// The recipe written as a TOML file in `dir`, for runs of the nanoforge program.
inline std::string recipe_file(const Recipe& recipe, const std::string& dir) {
  const std::string path = dir + "/recipe.toml";
  std::ofstream(path) << recipe_to_toml(recipe);
  return path;
}

}  // namespace nanoforge::test
