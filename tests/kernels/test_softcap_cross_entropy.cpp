// softcap_cross_entropy_forward / _forward_backward and sum_loss: the forward (capped logits written in
// place, log-sum-exp, per-row losses, 0 for target -1) against the formula in double, the forward-backward's
// gradient against central differences of loss_scale * mean(losses) in the raw logits, all-ignored batches,
// and thread-count independence.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr double kSoftcap = 15;  // nanochat's logit softcap
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct LossReference {
  std::vector<double> capped, lse, losses;
};

LossReference reference_loss(const std::vector<double>& logits, const HostTensor<int32_t>& targets,
                             int64_t vocab, double softcap) {
  const int64_t rows = targets.numel();
  LossReference r{std::vector<double>(logits.size()), std::vector<double>(static_cast<size_t>(rows)),
                  std::vector<double>(static_cast<size_t>(rows))};
  for (int64_t n = 0; n < rows; ++n) {
    double max_z = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < vocab; ++j) {
      r.capped[n * vocab + j] = softcap * std::tanh(logits[n * vocab + j] / softcap);
      max_z = std::max(max_z, r.capped[n * vocab + j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < vocab; ++j)
      sum += std::exp(r.capped[n * vocab + j] - max_z);
    r.lse[n] = max_z + std::log(sum);
    r.losses[n] = targets[n] == -1 ? 0.0 : r.lse[n] - r.capped[n * vocab + targets[n]];
  }
  return r;
}

// Raw logits in [-40, 40] (so the cap bends many of them) and random targets with rows 2 and 7 ignored.
template <class T>
struct LossTensors {
  HostTensor<T> logits, losses, lse;
  HostTensor<int32_t> targets;

  LossTensors(int64_t rows, int64_t vocab, uint64_t seed)
      : logits(random_tensor<T>({rows, vocab}, seed, -40, 40)),
        losses({rows}, static_cast<T>(kNaN)),
        lse({rows}, static_cast<T>(kNaN)),
        targets(random_ids({rows}, static_cast<int32_t>(vocab), seed + 1)) {
    for (int64_t n : {2, 7}) {
      if (n < rows) targets[n] = -1;
    }
  }

  // Caps a copy of the logits, leaving the raw logits as they were; returns the capped copy.
  HostTensor<T> forward() {
    HostTensor<T> capped = logits;
    ops::softcap_cross_entropy_forward(losses.view(), lse.view(), capped.view(), targets.view(), kSoftcap);
    return capped;
  }
};

template <class T>
void check_loss_forward(double rel) {
  LossTensors<T> t(10, 257, 160);
  const LossReference expected = reference_loss(t.logits.as_double(), t.targets, 257, kSoftcap);
  const HostTensor<T> capped = t.forward();
  EXPECT_TRUE(all_close(capped, expected.capped, rel)) << "capped logits";
  EXPECT_TRUE(all_close(t.lse, expected.lse, rel)) << "lse";
  EXPECT_TRUE(all_close(t.losses, expected.losses, rel)) << "losses";
  EXPECT_EQ(t.losses[2], T{0});
  EXPECT_EQ(t.losses[7], T{0});
}

TEST(SoftcapCrossEntropy, ForwardMatchesReferenceF64) {
  check_loss_forward<double>(kF64Rel);
}
// f32: tanh and exp round at ~1 ulp, the log-sum-exp sums 257 terms (~257 * 6e-8 = 1.5e-5 worst case of the
// sum, ~1e-6 typical), and loss = lse - z cancels to about a third of lse: 2e-5 of the rms.
TEST(SoftcapCrossEntropy, ForwardMatchesReferenceF32) {
  check_loss_forward<float>(2e-5);
}

// The forward-backward on a copy of the raw logits: the losses and lse it writes, and the gradient it leaves.
template <class T>
HostTensor<T> forward_backward(LossTensors<T>& t, double loss_scale) {
  HostTensor<T> gradient = t.logits;
  ops::softcap_cross_entropy_forward_backward(t.losses.view(), t.lse.view(), gradient.view(),
                                              t.targets.view(), kSoftcap, loss_scale);
  return gradient;
}

// L = loss_scale * mean(losses over the rows not ignored) in the raw logits; ignored rows get 0. The
// forward-backward's losses and lse are the forward's, bit for bit.
TEST(SoftcapCrossEntropy, ForwardBackwardMatchesFiniteDifferences) {
  LossTensors<double> t(6, 37, 161);
  const double loss_scale = 0.75, grad_scale = loss_scale / 5;  // 5 of the 6 rows are not ignored (row 2 is)
  const Objective objective = [&] {
    t.forward();
    ObjectiveValue result;
    for (int64_t n = 0; n < t.targets.numel(); ++n) {
      result.value += grad_scale * t.losses[n];
      result.magnitude += grad_scale * std::abs(t.lse[n]) * 2;  // loss = lse - z_target, both ~|lse|
    }
    return result;
  };
  t.forward();
  const HostTensor<double> losses = t.losses, lse = t.lse;
  const HostTensor<double> d_logits = forward_backward(t, loss_scale);
  EXPECT_TRUE(bitwise_equal(t.losses, losses));
  EXPECT_TRUE(bitwise_equal(t.lse, lse));
  EXPECT_TRUE(gradient_matches(t.logits, d_logits.as_double(), objective, 162, t.logits.numel()));
  for (int64_t j = 0; j < 37; ++j)
    EXPECT_EQ(d_logits[2 * 37 + j], 0.0) << "ignored row 2, column " << j;
}

// The f32 gradient against the f64 one on the same inputs: exp(z - lse) and (1 - (z/c)^2), a few roundings.
TEST(SoftcapCrossEntropy, ForwardBackwardF32MatchesF64) {
  LossTensors<float> t(12, 300, 163);
  LossTensors<double> t64(12, 300, 163);
  t64.logits = t.logits.cast<double>();
  const HostTensor<float> d_logits = forward_backward(t, 1.2);
  const HostTensor<double> d_logits64 = forward_backward(t64, 1.2);
  // exp(z - lse) with |z - lse| up to ~35 turns the absolute error of lse (~1e-6) into a relative one: 2e-5.
  EXPECT_TRUE(all_close(d_logits, d_logits64.as_double(), 2e-5));
}

// Rows are independent and the target count a plain integer: the same bits for 1, 2 or 3 threads.
TEST(SoftcapCrossEntropy, ForwardBackwardIsThreadCountIndependent) {
  LossTensors<float> t(40, 300, 167);
  EXPECT_TRUE(same_bits_for_every_thread_count<float>([&] {
    const HostTensor<float> gradient = forward_backward(t, 1.0);
    return std::vector<HostTensor<float>>{gradient, t.losses, t.lse};
  }));
}

TEST(SoftcapCrossEntropy, AllTargetsIgnored) {
  LossTensors<double> t(5, 20, 164);
  std::fill(t.targets.data.begin(), t.targets.data.end(), -1);
  const HostTensor<double> d_logits = forward_backward(t, 1.0);
  for (int64_t n = 0; n < 5; ++n)
    EXPECT_EQ(t.losses[n], 0.0) << "row " << n;
  for (double g : d_logits.data)
    ASSERT_EQ(g, 0.0);
  const ops::LossSum total = ops::sum_loss(t.losses.view(), t.targets.view());
  EXPECT_EQ(total.count, 0);
  EXPECT_EQ(total.sum, 0.0);
}

// ---- sum_loss ----

template <class T>
void check_sum_loss() {
  HostTensor<T> losses = random_tensor<T>({1000}, 165, 0, 10);
  HostTensor<int32_t> targets = random_ids({1000}, 50, 166);
  for (int64_t n = 0; n < 1000; n += 7)
    targets[n] = -1;
  double expected = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < 1000; ++n) {
    if (targets[n] == -1) continue;
    expected += double(losses[n]);
    ++count;
  }
  const ops::LossSum total = ops::sum_loss(losses.view(), targets.view());
  EXPECT_EQ(total.count, count);
  // Summed in double in any order: 1e3 terms of one sign, a few ulps each.
  EXPECT_NEAR(total.sum, expected, kF64Rel * expected);
}

TEST(SumLoss, MatchesReferenceF64) {
  check_sum_loss<double>();
}
TEST(SumLoss, MatchesReferenceF32) {
  check_sum_loss<float>();
}

template <class T>
void check_sum_loss_thread_independence() {
  HostTensor<T> losses = random_tensor<T>({5000}, 167, 0, 10);
  HostTensor<int32_t> targets = random_ids({5000}, 50, 168);
  for (int64_t n = 0; n < 5000; n += 5)
    targets[n] = -1;
  EXPECT_TRUE(same_bits_for_every_thread_count<double>([&] {
    const ops::LossSum total = ops::sum_loss(losses.view(), targets.view());
    return std::vector<HostTensor<double>>{HostTensor<double>({1}, total.sum),
                                           HostTensor<double>({1}, static_cast<double>(total.count))};
  }));
}

TEST(SumLoss, IsThreadCountIndependentF32) {
  check_sum_loss_thread_independence<float>();
}
TEST(SumLoss, IsThreadCountIndependentF64) {
  check_sum_loss_thread_independence<double>();
}

TEST(SoftcapCrossEntropyContracts, RejectsBadTargetsAndShapes) {
  use_threadsafe_death_tests();
  LossTensors<double> t(4, 9, 169);
  t.targets[1] = 9;
  EXPECT_DEATH(t.forward(), "target 9 at row 1 outside \\[0, 9\\) and not -1");
  t.targets[1] = -2;
  EXPECT_DEATH(t.forward(), "target -2 at row 1");
  t.targets[1] = 0;
  HostTensor<double> short_losses({3});
  EXPECT_DEATH(ops::softcap_cross_entropy_forward(short_losses.view(), t.lse.view(), t.logits.view(),
                                                  t.targets.view(), kSoftcap),
               "one entry per logits row");
  EXPECT_DEATH(
      ops::softcap_cross_entropy_forward(t.losses.view(), t.lse.view(), t.logits.view(), t.targets.view(), 0),
      "softcap must be positive");
  HostTensor<int32_t> short_targets({3});
  EXPECT_DEATH(ops::sum_loss(t.losses.view(), short_targets.view()), "differ in length");
}

}  // namespace
}  // namespace nanoforge::test
