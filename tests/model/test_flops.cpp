// flops_per_token: nanochat's estimate at the reference sizes (values from nanochat's estimate_flops
// formula).
#include <gtest/gtest.h>

#include "model/flops.h"

namespace nanoforge {
namespace {

TEST(Flops, MatchesNanochatsEstimate) {
  EXPECT_EQ(flops_per_token(GPTConfig::from_depth(20, 32768, 2048)), 2'886'212'784);
  EXPECT_EQ(flops_per_token(GPTConfig::from_depth(12, 32768, 2048)), 759'696'048);
  EXPECT_EQ(flops_per_token(GPTConfig::from_depth(24, 32768, 2048)), 4'775'225'616);
  EXPECT_EQ(flops_per_token(GPTConfig::from_depth(26, 32768, 2048)), 5'991'051'288);
}

TEST(Flops, CountsEveryLinearAndTheWindowedAttention) {
  const GPTConfig d20 = GPTConfig::from_depth(20, 32768, 2048);
  EXPECT_EQ(matmul_params(d20), 435'160'264);  // scaling params + smear_gate's 24
  // All-long windows cost the full sequence in every layer: 12 * H * D * T * L more than the matmuls.
  const GPTConfig all_long =
      GPTConfig::from_sizing({.depth = 20, .max_seq_len = 2048, .window_pattern = "L"}, 32768);
  EXPECT_EQ(flops_per_token(all_long) - 6 * matmul_params(all_long), 12LL * 10 * 128 * 2048 * 20);
}

}  // namespace
}  // namespace nanoforge
