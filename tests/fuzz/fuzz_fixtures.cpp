// The fixtures of fuzz_fixtures.h, built with the project's writers. Their failures abort: a fixture that
// cannot be built is a broken harness, not a finding.
#include "tests/fuzz/fuzz_fixtures.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "data/shards/shard_writer.h"
#include "step/memory_plan.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge::fuzz {
namespace {

void check_ok(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "fuzz fixture: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

// Document d's length (BOS included) and its token i: a known function of both, never BOS after position 0.
int64_t document_length(int64_t doc) {
  return 1 + (doc * 7) % 23;
}
int32_t document_token(int64_t doc, int64_t i, int64_t vocab_size) {
  const auto value = static_cast<int32_t>((doc * 131 + i * 17) % (vocab_size - 1));
  return value >= kFixtureBos ? value + 1 : value;
}

}  // namespace

const Tokenizer& fixture_tokenizer() {
  static const Tokenizer tokenizer = [] {
    std::vector<std::string> ranks;
    for (int byte = 0; byte < 256; ++byte)
      ranks.emplace_back(1, static_cast<char>(byte));
    for (const char* merge : {"th", "he", "the", " t", " the", "in", "ing", "\xc3\xa9"})
      ranks.emplace_back(merge);
    absl::StatusOr<Tokenizer> made = Tokenizer::from_ranks(std::move(ranks));
    check_ok(made.status(), "tokenizer");
    return std::move(*made);
  }();
  return tokenizer;
}

std::vector<std::string> write_fixture_shards(const std::string& dir, int64_t shards, int64_t vocab_size) {
  std::vector<std::string> paths;
  int64_t doc = 0;
  for (int64_t s = 0; s < shards; ++s) {
    const std::string path = (std::filesystem::path(dir) / shard_file_name("train", s)).string();
    absl::StatusOr<ShardWriter> writer =
        ShardWriter::create(path, {vocab_size, kFixtureBos, fixture_tokenizer().hash()});
    check_ok(writer.status(), "shard writer");
    for (int64_t d = 0; d < 12; ++d, ++doc) {
      std::vector<int32_t> tokens;
      for (int64_t i = 1; i < document_length(doc); ++i)
        tokens.push_back(document_token(doc, i, vocab_size));
      check_ok(writer->append_document(tokens), "shard document");
    }
    check_ok(writer->finish(), "shard");
    paths.push_back(path);
  }
  return paths;
}

std::shared_ptr<const ShardSet> fixture_shard_set() {
  static const std::shared_ptr<const ShardSet> set = [] {
    const std::vector<std::string> paths =
        write_fixture_shards(scratch_path("fixture_shards/"), 2, kFixtureVocab);
    absl::StatusOr<std::shared_ptr<const ShardSet>> opened = ShardSet::open(paths, ShardOpenOptions{});
    check_ok(opened.status(), "shard set");
    return *opened;
  }();
  return set;
}

LoaderOptions fixture_loader_options() {
  LoaderOptions options;
  options.batch_rows = 2;
  options.sequence_length = 16;
  options.seed = 3;
  options.doc_buffer_size = 8;
  options.ring_batches = 2;
  return options;
}

LoaderState fixture_loader_state(int batches) {
  absl::StatusOr<std::unique_ptr<Loader>> loader =
      Loader::create(fixture_shard_set(), fixture_loader_options());
  check_ok(loader.status(), "loader");
  for (int b = 0; b < batches; ++b)
    check_ok((*loader)->next().status(), "loader batch");
  return (*loader)->state();
}

void use_shard(const TokenShard& shard) {
  std::vector<int32_t> tokens;
  for (int64_t doc = 0; doc < shard.doc_count(); ++doc) {
    tokens.resize(static_cast<size_t>(shard.doc_length(doc)));
    const absl::Status copied = shard.copy_document_prefix(doc, shard.doc_length(doc), tokens.data());
    require_named(copied, shard.path());
    if (!copied.ok()) return;
  }
  const absl::Status verified = shard.verify_tokens();
  require_named(verified, shard.path());
  if (!verified.ok()) return;
  absl::StatusOr<std::shared_ptr<const ShardSet>> set = ShardSet::from_shards({shard});
  require_named(set.status(), shard.path());
  if (!set.ok()) return;
  LoaderOptions options = fixture_loader_options();
  absl::StatusOr<std::unique_ptr<Loader>> loader = Loader::create(*set, options);
  if (!loader.ok()) return;
  for (int b = 0; b < 2; ++b) {
    const absl::StatusOr<TokenBatch> batch = (*loader)->next();
    require_named(batch.status(), shard.path());
    if (!batch.ok()) return;
  }
}

Recipe tiny_recipe() {
  Recipe recipe;
  recipe.model.depth = 1;
  recipe.model.aspect_ratio = 24;
  recipe.model.head_dim = 12;
  recipe.model.max_seq_len = 16;
  recipe.model.window_pattern = "L";
  recipe.data.train = "shards";
  recipe.data.val = "shards";
  recipe.data.tokenizer = "tokenizer";
  recipe.train.device_batch_size = 2;
  recipe.train.horizon.total_batch_size = 32;
  recipe.train.horizon.num_iterations = 10;
  recipe.train.device = "cpu";
  return recipe;
}

GPTConfig tiny_model_config() {
  return GPTConfig::from_sizing(tiny_recipe().model, 8);
}

TinyTraining::TinyTraining()
    : config(tiny_model_config()),
      model(config, Device::kCpu, training_dtype(Device::kCpu)),
      groups(nanochat_param_groups(config, model.layout(), tiny_recipe().optim, 1.0, 0.0)),
      optimizer(groups, model.layout(), model.params(), model.grads(), communicator, int64_t{1} << 20) {
  model.init_weights(11);
}

TinyTraining& tiny_training() {
  static TinyTraining training;
  return training;
}

std::string write_fixture_checkpoint(const std::string& run_dir, int64_t step) {
  TinyTraining& training = tiny_training();
  TrainerState trainer;
  trainer.step = step;
  trainer.loader_state = fixture_loader_state(2).to_bytes();
  trainer.recipe_toml = recipe_to_toml(tiny_recipe());
  trainer.tokenizer_hash = fixture_tokenizer().hash();
  trainer.training_seconds = 1.5;
  CheckpointSnapshot snapshot;
  take_model_snapshot(training.model, std::move(trainer), snapshot);
  check_ok(training.optimizer.gather_state(snapshot.optimizer_state), "optimizer state");
  snapshot.optimizer_steps = step;
  check_ok(write_checkpoint(run_dir, snapshot), "checkpoint");
  return (std::filesystem::path(run_dir) / "checkpoints" / checkpoint_name(step)).string();
}

}  // namespace nanoforge::fuzz
