// base_train's FP8 layer filter on nanochat's shapes: the speedrun's d24 and the d20 reference converts
// every projection, a GQA model of width 128 keeps its 64-wide c_k and c_v in full precision, and the
// filter's two rules (multiple of 16, smaller side >= 128) each reject on their own.
#include <gtest/gtest.h>

#include "model/fp8_linears.h"

namespace nanoforge {
namespace {

TEST(Fp8Linears, FilterNeedsMultiplesOf16AndASmallerSideOf128) {
  EXPECT_TRUE(fp8_linear_eligible(128, 128));
  EXPECT_TRUE(fp8_linear_eligible(1280, 32768));
  EXPECT_FALSE(fp8_linear_eligible(128, 64));   // smaller side below 128
  EXPECT_FALSE(fp8_linear_eligible(136, 200));  // 200 is no multiple of 16
  EXPECT_FALSE(fp8_linear_eligible(12, 10));    // ve_gate's shape on every model
  EXPECT_FALSE(fp8_linear_eligible(24, 1));     // smear_gate
}

TEST(Fp8Linears, SpeedrunDepth24ConvertsEveryProjectionAndTheHead) {
  // base_train --depth=24: model dim 24 * 64 = 1536, 12 heads of 128, vocabulary 32768.
  const Fp8Linears f = Fp8Linears::of(GPTConfig::from_depth(24, 32768, 2048));
  EXPECT_TRUE(f.c_q && f.c_k && f.c_v && f.c_proj && f.mlp_fc && f.mlp_proj && f.lm_head);
  // 6 per block x 24 + lm_head; nn.Linear count adds ve_gate on 12 layers and smear_gate.
  EXPECT_EQ(f.converted, 145);
  EXPECT_EQ(f.linears, 6 * 24 + 12 + 2);
  EXPECT_EQ(f.summary(), "converted 145/158 linear layers, skipped 13 (too small)");
}

TEST(Fp8Linears, NarrowGqaKeysAndValuesStayInFullPrecision) {
  // The committed golden tests/parity/golden/model_fp8_gqa.h5: nanochat converted c_q, c_proj, c_fc,
  // mlp c_proj and lm_head (5), not c_k and c_v (128 -> 64).
  GPTConfig config;
  config.n_layer = 1;
  config.n_embd = 128;
  config.n_head = 4;
  config.n_kv_head = 2;
  config.vocab_size = 200;  // padded to 256
  const Fp8Linears f = Fp8Linears::of(config);
  EXPECT_TRUE(f.c_q && f.c_proj && f.mlp_fc && f.mlp_proj && f.lm_head);
  EXPECT_FALSE(f.c_k || f.c_v);
  EXPECT_EQ(f.converted, 5);
  config.n_kv_head = 4;  // model_fp8_mha.h5: all 7
  EXPECT_EQ(Fp8Linears::of(config).converted, 7);
}

TEST(Fp8Linears, SmallModelsConvertNothing) {
  GPTConfig config;
  config.n_layer = 2;
  config.n_embd = 64;
  config.n_head = 2;
  config.n_kv_head = 2;
  config.vocab_size = 512;
  EXPECT_EQ(Fp8Linears::of(config).converted, 0);
}

}  // namespace
}  // namespace nanoforge
