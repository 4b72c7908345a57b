// GPTConfig: nanochat's depth sizing, window rule, value-embedding layers and validation messages.
#include <gtest/gtest.h>

#include "model/gpt_config.h"

namespace nanoforge {
namespace {

TEST(GPTConfig, DerivesNanochatShapesFromDepth) {
  struct Expected {
    int64_t depth, n_embd, n_head;
  };
  // nanochat's base_train: dim = depth * 64 rounded up to a multiple of 128, heads = dim / 128.
  for (const Expected& e : {Expected{12, 768, 6}, Expected{20, 1280, 10}, Expected{24, 1536, 12},
                            Expected{26, 1664, 13}, Expected{4, 256, 2}, Expected{3, 256, 2}}) {
    const GPTConfig config = GPTConfig::from_depth(e.depth, 32768, 2048);
    EXPECT_EQ(config.n_embd, e.n_embd) << "depth " << e.depth;
    EXPECT_EQ(config.n_head, e.n_head) << "depth " << e.depth;
    EXPECT_EQ(config.n_kv_head, e.n_head);
    EXPECT_EQ(config.head_dim(), 128);
    EXPECT_TRUE(config.validate().ok());
  }
  // runcpu.sh: depth 6 with head dim 64 gives 384 = 6 heads.
  const GPTConfig cpu = GPTConfig::from_sizing(
      {.depth = 6, .aspect_ratio = 64, .head_dim = 64, .max_seq_len = 512, .window_pattern = "L"}, 32768);
  EXPECT_EQ(cpu.n_embd, 384);
  EXPECT_EQ(cpu.n_head, 6);
}

TEST(GPTConfig, ShortWindowIsAQuarterRoundedUpTo128) {
  GPTConfig config = GPTConfig::from_depth(20, 32768, 2048);
  EXPECT_EQ(config.short_window(), 512);  // not 768: gpt.py's "(2048 -> 768)" comment is stale
  config.sequence_len = 512;
  EXPECT_EQ(config.short_window(), 128);
  config.sequence_len = 160;
  EXPECT_EQ(config.short_window(), 128);
  config.sequence_len = 2049;
  EXPECT_EQ(config.short_window(), 640);
}

TEST(GPTConfig, PatternTilesLayersAndTheLastLayerIsLong) {
  const GPTConfig d20 =
      GPTConfig::from_sizing({.depth = 20, .max_seq_len = 2048, .window_pattern = "SSSL"}, 32768);
  for (int64_t layer = 0; layer < 20; ++layer) {
    const bool long_layer = layer % 4 == 3;  // layers 3, 7, 11, 15, 19
    EXPECT_EQ(d20.window(layer), long_layer ? 2048 : 512) << "layer " << layer;
  }
  const GPTConfig d26 =
      GPTConfig::from_sizing({.depth = 26, .max_seq_len = 2048, .window_pattern = "SSSL"}, 32768);
  EXPECT_EQ(d26.window(24), 512);
  EXPECT_EQ(d26.window(25), 2048);  // would be S by the pattern; forced L
  const GPTConfig one = GPTConfig::from_sizing({.depth = 1, .max_seq_len = 300, .window_pattern = "S"}, 64);
  EXPECT_EQ(one.window(0), 300);
}

TEST(GPTConfig, ValueEmbeddingsOnAlternateLayersEndingWithTheLast) {
  const GPTConfig d20 = GPTConfig::from_depth(20, 32768, 2048);
  int count = 0;
  for (int64_t layer = 0; layer < 20; ++layer) {
    EXPECT_EQ(d20.has_value_embed(layer), layer % 2 == 1) << "layer " << layer;
    count += d20.has_value_embed(layer);
  }
  EXPECT_EQ(count, 10);
  const GPTConfig odd = GPTConfig::from_depth(5, 32768, 2048);
  EXPECT_TRUE(odd.has_value_embed(0));
  EXPECT_TRUE(odd.has_value_embed(4));
  EXPECT_FALSE(odd.has_value_embed(3));
  EXPECT_EQ(d20.backout_layer(), 10);
}

TEST(GPTConfig, PadsVocabToMultipleOf64) {
  GPTConfig config;
  config.vocab_size = 300;
  EXPECT_EQ(config.padded_vocab_size(), 320);
  config.vocab_size = 32768;
  EXPECT_EQ(config.padded_vocab_size(), 32768);
  config.vocab_size = 65;
  EXPECT_EQ(config.padded_vocab_size(), 128);
}

TEST(GPTConfig, ValidationNamesTheField) {
  auto message_of = [](GPTConfig config) { return std::string(config.validate().message()); };
  GPTConfig base;
  base.n_head = 5;
  EXPECT_NE(message_of(base).find("n_embd 768 must be divisible by n_head 5"), std::string::npos);
  base = GPTConfig{};
  base.n_kv_head = 4;
  EXPECT_NE(message_of(base).find("n_kv_head 4"), std::string::npos);
  base = GPTConfig{};
  base.window_pattern = "SXL";
  EXPECT_NE(message_of(base).find("window_pattern"), std::string::npos);
  base = GPTConfig{};
  base.n_embd = 16;
  base.n_head = 2;
  base.n_kv_head = 2;
  EXPECT_NE(message_of(base).find("smear"), std::string::npos);
  base = GPTConfig{};
  base.n_embd = 18;
  base.n_head = 6;
  base.n_kv_head = 6;
  EXPECT_FALSE(base.validate().ok());  // head dim 3 is odd
  base = GPTConfig{};
  base.sequence_len = 1;
  EXPECT_NE(message_of(base).find("sequence_len"), std::string::npos);
}

}  // namespace
}  // namespace nanoforge
