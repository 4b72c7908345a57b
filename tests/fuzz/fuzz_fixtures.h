// The valid things the fuzz targets start from and the seed corpus is made of, written by nanoforge's own
// writers: a small tokenizer, small token shards and a loader over them, and a tiny model with its optimizer
// whose checkpoint (model.h5, optimizer.h5, trainer.h5, `latest`) a target damages one file at a time. Each
// is built once per process (the targets run millions of inputs against them).
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/loader/loader.h"
#include "data/shards/shard.h"
#include "data/shards/shard_set.h"
#include "data/tokenizer/tokenizer.h"
#include "dist/single_communicator.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "train/recipe.h"

namespace nanoforge::fuzz {

// The shards' vocabulary and BOS (what an llm.c .bin reader must be told).
inline constexpr int64_t kFixtureVocab = 1000;
inline constexpr int32_t kFixtureBos = 7;

// The 256 bytes and a few merges, with nanochat's specials: small enough to load for every input.
const Tokenizer& fixture_tokenizer();

// Writes shards of synthetic documents (BOS then tokens < kFixtureVocab) as DIR/train_0000N.h5; returns the
// paths. A vocab_size above 65536 stores uint32 tokens.
std::vector<std::string> write_fixture_shards(const std::string& dir, int64_t shards, int64_t vocab_size);
// Two shards under the scratch directory, opened and verified.
std::shared_ptr<const ShardSet> fixture_shard_set();
// The loader the fixture's loader states belong to (small rows and buffer, so states are small).
LoaderOptions fixture_loader_options();
// The state of a loader over fixture_shard_set() after `batches` batches.
LoaderState fixture_loader_state(int batches);

// Reads a shard as training would: every document copied (checking BOS and the vocabulary), the full token
// check, then a loader over the shard for two batches. Errors must name the shard's file.
void use_shard(const TokenShard& shard);

// The tiny model's recipe (depth 1, width 24, sequence 16) and config (vocabulary 8, padded to 64).
Recipe tiny_recipe();
GPTConfig tiny_model_config();

// The tiny model (initialised) with its optimizer on the CPU, world size 1.
struct TinyTraining {
  TinyTraining();
  GPTConfig config;
  SingleCommunicator communicator{Device::kCpu};
  GPT model;
  std::vector<ParamGroup> groups;
  DataParallelOptimizer optimizer;
};
TinyTraining& tiny_training();

// Writes RUN_DIR/checkpoints/step_NNNNNN (and `latest`) of tiny_training() at `step`, with the state of
// fixture_loader_state(2) and tiny_recipe(); returns the checkpoint directory.
std::string write_fixture_checkpoint(const std::string& run_dir, int64_t step);

}  // namespace nanoforge::fuzz
