// The whole model's backward pass against central finite differences of its loss, in f64, on a small
// config that exercises everything at once: GQA, a short window that really cuts (seq 136 > 128), value
// embeddings, backout before the last layer, an ignored target and a padded vocabulary.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/host_transfer.h"
#include "model/gpt.h"
#include "support/philox.h"

namespace nanoforge {
namespace {

GPTConfig small_config() {
  GPTConfig config;
  config.n_layer = 3;
  config.n_embd = 48;
  config.n_head = 4;
  config.n_kv_head = 2;
  config.vocab_size = 37;  // padded to 64
  config.sequence_len = 136;
  config.window_pattern = "SL";
  return config;
}

class GptGradientTest : public ::testing::Test {
 protected:
  static constexpr int64_t kBatch = 2, kSeq = 136;

  GptGradientTest() : model_(small_config(), Device::kCpu, DType::kF64) {
    model_.init_weights(7);
    // Perturb every weight so no gradient is zero by construction (the projections start at zero).
    double* params = model_.params().as<double>();
    const Philox noise(11, Philox::stream_of("perturbation"));
    for (int64_t i = 0; i < model_.params().numel(); ++i)
      params[i] += 0.05 * noise.normal(i);
    const Philox tokens(3, Philox::stream_of("tokens"));
    ids_.resize(kBatch * kSeq);
    targets_.resize(kBatch * kSeq);
    for (int64_t i = 0; i < kBatch * kSeq; ++i) {
      ids_[i] = static_cast<int32_t>(tokens.uniform(2 * i) * 37);
      targets_[i] = static_cast<int32_t>(tokens.uniform(2 * i + 1) * 37);
    }
    targets_[5] = -1;
    model_.plan(kBatch, kSeq);
  }

  TensorView ids() { return TensorView(ids_.data(), {kBatch, kSeq}, DType::kI32, Device::kCpu); }
  TensorView targets() { return TensorView(targets_.data(), {kBatch, kSeq}, DType::kI32, Device::kCpu); }
  double loss() { return model_.forward(ids(), targets()); }
  // The loss of a forward whose loss pass also writes the logits' gradient, which backward() then uses.
  double loss_for_backward(double loss_scale = 1.0) {
    return model_.forward_for_backward(ids(), targets(), loss_scale);
  }

  GPT model_;
  std::vector<int32_t> ids_, targets_;
};

TEST_F(GptGradientTest, EveryParameterMatchesFiniteDifferences) {
  model_.zero_grad();
  loss_for_backward();
  model_.backward();
  const std::vector<double> grads = download<double>(model_.grads());
  double* params = model_.params().as<double>();
  const Philox pick(5, Philox::stream_of("elements"));
  // Central differences in f64 with h = 1e-5: truncation ~h^2 * |f'''| ~ 1e-10 and rounding
  // ~1e-16 * |loss| / h ~ 4e-11, against gradients of 1e-5 .. 1e-1; 1e-5 relative + 1e-9 absolute
  // leaves a margin of ~10x over both while catching any wrong term (those are >= 1e-3 relative).
  constexpr double kStep = 1e-5, kRelative = 1e-5, kAbsolute = 1e-9;
  int checked = 0;
  for (const ParamInfo& param : model_.layout().params()) {
    const int64_t samples = std::min<int64_t>(param.numel, 4);
    for (int64_t s = 0; s < samples; ++s) {
      // Small vectors are checked whole; for matrices, random elements among the real vocabulary rows.
      int64_t element = param.numel <= 4 ? s : static_cast<int64_t>(pick.uniform(checked) * param.numel);
      if (param.shape.size() == 2 && param.shape[0] == 64) element %= 37 * param.shape[1];
      double& weight = params[param.offset + element];
      const double saved = weight;
      weight = saved + kStep;
      const double up = loss();
      weight = saved - kStep;
      const double down = loss();
      weight = saved;
      const double numeric = (up - down) / (2 * kStep);
      const double analytic = grads[param.offset + element];
      EXPECT_NEAR(analytic, numeric, kAbsolute + kRelative * std::abs(numeric))
          << param.name << "[" << element << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 80);
}

TEST_F(GptGradientTest, PaddedVocabularyRowsGetNoGradient) {
  model_.zero_grad();
  loss_for_backward();
  model_.backward();
  for (const char* name : {"lm_head.weight", "transformer.wte.weight", "value_embeds.2.weight"}) {
    const std::vector<double> grad = download<double>(model_.grad(name));
    const int64_t width = model_.grad(name).shape[1];
    double real_rows = 0, padded_rows = 0;
    for (int64_t i = 0; i < 64 * width; ++i)
      (i < 37 * width ? real_rows : padded_rows) += std::abs(grad[i]);
    EXPECT_GT(real_rows, 0.0) << name;
    EXPECT_EQ(padded_rows, 0.0) << name;
  }
}

TEST_F(GptGradientTest, BackwardAccumulatesAndScales) {
  model_.zero_grad();
  loss_for_backward();
  model_.backward();
  const std::vector<double> once = download<double>(model_.grads());
  loss_for_backward();
  model_.backward();
  const std::vector<double> twice = download<double>(model_.grads());
  model_.zero_grad();
  loss_for_backward(2.0);
  model_.backward();
  const std::vector<double> scaled = download<double>(model_.grads());
  double largest = 0;
  for (double g : once)
    largest = std::max(largest, std::abs(g));
  for (size_t i = 0; i < once.size(); ++i) {
    // A loss scale of 2 doubles every term of the backward pass exactly (binary floating point): bitwise 2x.
    ASSERT_EQ(scaled[i], 2 * once[i]) << i;
    // Accumulating adds the second pass's partial sums into the first's (a GEMM with beta = 1 adds its
    // K-blocks one by one), a different order than 2x: equal up to f64 rounding of the summed terms, which
    // are at most ~the largest gradient: 1e-13 of it is ~500 ulps.
    ASSERT_NEAR(twice[i], 2 * once[i], 1e-13 * largest) << i;
  }
}

TEST_F(GptGradientTest, ForwardAndBackwardAreDeterministic) {
  model_.zero_grad();
  const double first = loss_for_backward();
  model_.backward();
  const std::vector<double> grads = download<double>(model_.grads());
  model_.zero_grad();
  EXPECT_EQ(loss_for_backward(), first);
  EXPECT_EQ(loss(), first);  // the evaluation forward computes the same loss
  loss_for_backward();
  model_.backward();
  EXPECT_EQ(download<double>(model_.grads()), grads);
}

TEST_F(GptGradientTest, AllTargetsIgnoredGivesNanLossAndNoGradient) {
  std::fill(targets_.begin(), targets_.end(), -1);
  model_.zero_grad();
  EXPECT_TRUE(std::isnan(loss_for_backward()));
  model_.backward();
  for (double g : download<double>(model_.grads()))
    ASSERT_EQ(g, 0.0);
}

// The logits buffer holds either the logits (forward) or their gradient (forward_for_backward): backward
// needs the second, capped_logits the first.
TEST_F(GptGradientTest, BackwardNeedsTheTrainingForwardAndCappedLogitsTheOther) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  loss();
  EXPECT_DEATH(model_.backward(), "call forward_for_backward first");
  loss_for_backward();
  EXPECT_DEATH(model_.capped_logits(0, 1), "the logits are read after forward\\(\\)");
}

}  // namespace
}  // namespace nanoforge
