// init_weights: nanochat's distributions, bounds, zeros and lambda ramps, reproducible from the seed.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/host_transfer.h"
#include "model/gpt.h"

namespace nanoforge {
namespace {

struct Moments {
  double mean = 0, std = 0, min = 0, max = 0;
};

Moments moments_of(const std::vector<float>& values) {
  Moments m{0, 0, values[0], values[0]};
  double squares = 0;
  for (float v : values) {
    m.mean += v;
    squares += static_cast<double>(v) * v;
    m.min = std::min<double>(m.min, v);
    m.max = std::max<double>(m.max, v);
  }
  m.mean /= static_cast<double>(values.size());
  m.std = std::sqrt(squares / static_cast<double>(values.size()) - m.mean * m.mean);
  return m;
}

class InitTest : public ::testing::Test {
 protected:
  InitTest() : model_(GPTConfig::from_depth(4, 1000, 256), Device::kCpu, DType::kF32) {
    model_.init_weights(42);
  }
  std::vector<float> values(const std::string& name) const { return download<float>(model_.param(name)); }
  GPT model_;
};

TEST_F(InitTest, EmbeddingsAndHeadAreNormalWithNanochatsStd) {
  // 1024 x 256 samples: the standard error of the std is std / sqrt(2n) ~ 0.0014 * std; 2% is > 10 errors.
  const Moments wte = moments_of(values("transformer.wte.weight"));
  EXPECT_NEAR(wte.std, 0.8, 0.8 * 0.02);
  EXPECT_NEAR(wte.mean, 0.0, 0.01);
  const Moments head = moments_of(values("lm_head.weight"));
  EXPECT_NEAR(head.std, 0.001, 0.001 * 0.02);
}

TEST_F(InitTest, MatricesAreUniformWithNanochatsBounds) {
  const double s = std::sqrt(3.0) / std::sqrt(256.0);
  for (const char* name : {"attn.c_q", "attn.c_k", "attn.c_v"}) {
    const Moments m = moments_of(values(layer_param(2, name)));
    EXPECT_GE(m.min, -s);
    EXPECT_LE(m.max, s);
    EXPECT_GT(m.max, 0.99 * s);  // the range is used, not a narrower one
    EXPECT_NEAR(m.std, s / std::sqrt(3.0), 0.03 * s / std::sqrt(3.0));
  }
  const Moments fc = moments_of(values(layer_param(0, "mlp.c_fc")));
  EXPECT_LE(fc.max, 0.4 * s);
  EXPECT_GT(fc.max, 0.99 * 0.4 * s);
  const Moments ve = moments_of(values(value_embed_param(3)));
  EXPECT_LE(ve.max, s);
  EXPECT_GT(ve.max, 0.99 * s);
}

TEST_F(InitTest, ProjectionsStartAtZeroAndGatesSmallPositive) {
  for (const char* name : {"attn.c_proj", "mlp.c_proj"}) {
    const Moments m = moments_of(values(layer_param(1, name)));
    EXPECT_EQ(m.min, 0.0);
    EXPECT_EQ(m.max, 0.0);
  }
  for (const std::string& name : {layer_param(1, "attn.ve_gate"), std::string("smear_gate.weight")}) {
    const Moments m = moments_of(values(name));
    EXPECT_GE(m.min, 0.0) << name;
    EXPECT_LE(m.max, 0.02) << name;
    EXPECT_GT(m.max, 0.0) << name;
  }
  EXPECT_EQ(values("smear_lambda"), std::vector<float>{0.0f});
  EXPECT_EQ(values("backout_lambda"), std::vector<float>{0.2f});
}

TEST_F(InitTest, LambdasFollowNanochatsRamps) {
  const std::vector<float> resid = values("resid_lambdas"), x0 = values("x0_lambdas");
  ASSERT_EQ(resid.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(resid[i], static_cast<float>(1.15 - 0.10 * i / 3.0)) << i;
    EXPECT_FLOAT_EQ(x0[i], static_cast<float>(0.20 - 0.15 * i / 3.0)) << i;
  }
}

TEST_F(InitTest, SameSeedSameWeightsOtherSeedOtherWeights) {
  GPT again(model_.config(), Device::kCpu, DType::kF32);
  again.init_weights(42);
  EXPECT_EQ(download<float>(again.params()), download<float>(model_.params()));
  GPT other(model_.config(), Device::kCpu, DType::kF32);
  other.init_weights(43);
  EXPECT_NE(download<float>(other.param("transformer.wte.weight")), values("transformer.wte.weight"));
}

}  // namespace
}  // namespace nanoforge
