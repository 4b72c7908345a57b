// Philox4x32-10 against the known-answer vectors published with Random123 (kat_vectors), and the
// distributions built on it.
#include <gtest/gtest.h>

#include <cmath>

#include "support/philox.h"

namespace nanoforge {
namespace {

// Philox's block() takes (block counter, stream) as the four counter words and the seed as the key; the
// vectors are expressed in those terms.
TEST(Philox, MatchesRandom123KnownAnswers) {
  const auto zeros = Philox(0, 0).block(0);
  EXPECT_EQ(zeros[0], 0x6627e8d5u);
  EXPECT_EQ(zeros[1], 0xe169c58du);
  EXPECT_EQ(zeros[2], 0xbc57ac4cu);
  EXPECT_EQ(zeros[3], 0x9b00dbd8u);

  const auto ones = Philox(~0ull, ~0ull).block(~0ull);
  EXPECT_EQ(ones[0], 0x408f276du);
  EXPECT_EQ(ones[1], 0x41c83b0eu);
  EXPECT_EQ(ones[2], 0xa20bc7c6u);
  EXPECT_EQ(ones[3], 0x6d5451fdu);

  // counter = (243f6a88, 85a308d3, 13198a2e, 03707344), key = (a4093822, 299f31d0): digits of pi.
  const auto pi = Philox(0x299f31d0a4093822ull, 0x0370734413198a2eull).block(0x85a308d3243f6a88ull);
  EXPECT_EQ(pi[0], 0xd16cfe09u);
  EXPECT_EQ(pi[1], 0x94fdccebu);
  EXPECT_EQ(pi[2], 0x5001e420u);
  EXPECT_EQ(pi[3], 0x24126ea1u);
}

TEST(Philox, UniformAndNormalHaveTheirMoments) {
  const Philox rng(42, Philox::stream_of("moments"));
  constexpr int kSamples = 200000;
  double uniform_sum = 0, normal_sum = 0, normal_squares = 0, uniform_min = 1, uniform_max = 0;
  for (int i = 0; i < kSamples; ++i) {
    const double u = rng.uniform(i);
    uniform_sum += u;
    uniform_min = std::min(uniform_min, u);
    uniform_max = std::max(uniform_max, u);
    const double n = rng.normal(i);
    normal_sum += n;
    normal_squares += n * n;
  }
  // Standard errors at 2e5 samples: uniform mean 0.00065, normal mean 0.0022, normal variance 0.0032;
  // the bounds are about 5 standard errors.
  EXPECT_NEAR(uniform_sum / kSamples, 0.5, 0.003);
  EXPECT_GE(uniform_min, 0.0);
  EXPECT_LT(uniform_max, 1.0);
  EXPECT_NEAR(normal_sum / kSamples, 0.0, 0.011);
  EXPECT_NEAR(normal_squares / kSamples, 1.0, 0.016);
}

TEST(Philox, StreamsAreIndependentOfEachOther) {
  const Philox a(7, Philox::stream_of("transformer.wte.weight"));
  const Philox b(7, Philox::stream_of("lm_head.weight"));
  int equal = 0;
  for (int i = 0; i < 1000; ++i)
    equal += a.uniform(i) == b.uniform(i);
  EXPECT_EQ(equal, 0);
  EXPECT_EQ(a.uniform(123), Philox(7, Philox::stream_of("transformer.wte.weight")).uniform(123));
}

}  // namespace
}  // namespace nanoforge
