// The optimizer ops (AdamW, and Muon's momentum, equilibration, normalisations, NorMuon and cautious update)
// against double references written from the formulas in kernels/ops.h, plus thread-count determinism of
// the ops that reduce (their norms are ordered sums).
#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

double frobenius(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x)
    sum += v * v;
  return std::sqrt(sum);
}

TEST(AdamWUpdate, MatchesPyTorchsFormulaOverSteps) {
  const ops::AdamWStep base{0.01, 0.8, 0.95, 1e-8, 0.1, 1};
  HostTensor<double> p = random_tensor<double>({5, 7}, 1), m({5, 7}), v({5, 7});
  std::vector<double> rp = p.as_double(), rm(35, 0.0), rv(35, 0.0);
  for (int64_t t = 1; t <= 4; ++t) {
    HostTensor<double> g = random_tensor<double>({5, 7}, 10 + t);
    ops::AdamWStep hyper = base;
    hyper.step = t;
    ops::adamw_update(p.view(), g.view(), m.view(), v.view(), hyper);
    for (int i = 0; i < 35; ++i) {
      rp[i] *= 1 - base.lr * base.weight_decay;
      rm[i] = base.beta1 * rm[i] + (1 - base.beta1) * g[i];
      rv[i] = base.beta2 * rv[i] + (1 - base.beta2) * g[i] * g[i];
      const double m_hat = rm[i] / (1 - std::pow(base.beta1, t));
      const double v_hat = rv[i] / (1 - std::pow(base.beta2, t));
      rp[i] -= base.lr * m_hat / (std::sqrt(v_hat) + base.eps);
    }
  }
  // Same operations, reassociated (lerp form, bias corrections folded): a few ulps per step.
  EXPECT_TRUE(all_close(p, rp, 1e-13));
  EXPECT_TRUE(all_close(m, rm, 1e-13));
  EXPECT_TRUE(all_close(v, rv, 1e-13));
}

TEST(MuonNesterovMomentum, UpdatesBufferAndBlendsTheGradient) {
  HostTensor<double> g = random_tensor<double>({4, 6}, 2), buffer = random_tensor<double>({4, 6}, 3),
                     out({4, 6});
  std::vector<double> expected_buffer(24), expected_out(24);
  const double mu = 0.9;
  for (int i = 0; i < 24; ++i) {
    expected_buffer[i] = mu * buffer[i] + (1 - mu) * g[i];
    expected_out[i] = (1 - mu) * g[i] + mu * expected_buffer[i];
  }
  ops::muon_nesterov_momentum(out.view(), buffer.view(), g.view(), mu);
  EXPECT_TRUE(all_close(buffer, expected_buffer, 1e-15));
  EXPECT_TRUE(all_close(out, expected_out, 1e-15));
  // update may alias grad: the same bits as a separate output
  HostTensor<double> buffer_copy = buffer, separate({4, 6});
  ops::muon_nesterov_momentum(separate.view(), buffer_copy.view(), g.view(), 0.7);
  ops::muon_nesterov_momentum(g.view(), buffer.view(), g.view(), 0.7);
  EXPECT_TRUE(bitwise_equal(g, separate));
  EXPECT_TRUE(bitwise_equal(buffer, buffer_copy));
}

TEST(MuonEquilibrateRows, GivesEveryRowTheRmsRowNorm) {
  HostTensor<double> x = random_tensor<double>({6, 10}, 4);
  for (int c = 0; c < 10; ++c)
    x[2 * 10 + c] *= 50;  // one loud row
  const std::vector<double> before = x.as_double();
  const double target = frobenius(before) / std::sqrt(6.0);
  std::vector<double> expected(before);
  for (int r = 0; r < 6; ++r) {
    double norm = 0;
    for (int c = 0; c < 10; ++c)
      norm += before[r * 10 + c] * before[r * 10 + c];
    for (int c = 0; c < 10; ++c)
      expected[r * 10 + c] *= target / std::sqrt(norm);
  }
  ops::muon_equilibrate_rows(x.view());
  EXPECT_TRUE(all_close(x, expected, 1e-14));
  HostTensor<double> zero_row({2, 3}, 0.0);
  zero_row[0] = 1;
  ops::muon_equilibrate_rows(zero_row.view());
  for (double v : zero_row.data)
    EXPECT_TRUE(std::isfinite(v));  // norms floored at 1e-6, no 0/0
}

TEST(FrobeniusNormalisation, DividesAndRescalesAsDocumented) {
  HostTensor<double> x = random_tensor<double>({5, 8}, 5);
  const std::vector<double> before = x.as_double();
  const double norm = frobenius(before);
  ops::normalize_frobenius(x.view(), 1.01, 1e-6);
  std::vector<double> expected(before);
  for (double& v : expected)
    v /= norm * 1.01 + 1e-6;
  EXPECT_TRUE(all_close(x, expected, 1e-14));
  ops::rescale_frobenius(x.view(), 3.0, 1e-6);
  EXPECT_NEAR(frobenius(x.as_double()), 3.0, 1e-13);
  HostTensor<double> zeros({3, 3}, 0.0);
  ops::rescale_frobenius(zeros.view(), 3.0, 1e-6);  // max(norm, eps) keeps zero at zero
  for (double v : zeros.data)
    EXPECT_EQ(v, 0.0);
}

// NorMuon in double from nanochat's optim.py: statistics along rows (m >= n) or columns (m < n).
void expect_normuon(int64_t rows, int64_t cols, uint64_t seed) {
  const bool per_row = rows >= cols;
  HostTensor<double> g = random_tensor<double>({rows, cols}, seed);
  HostTensor<double> state = per_row ? random_tensor<double>({rows, 1}, seed + 1, 0.0, 1.0)
                                     : random_tensor<double>({1, cols}, seed + 1, 0.0, 1.0);
  const std::vector<double> before = g.as_double();
  std::vector<double> expected_state = state.as_double(), step(expected_state.size());
  const int64_t groups = per_row ? rows : cols, reduced = per_row ? cols : rows;
  double norm_sq = 0, new_norm_sq = 0;
  for (int64_t k = 0; k < groups; ++k) {
    double squares = 0;
    for (int64_t j = 0; j < reduced; ++j) {
      const double v = per_row ? before[k * cols + j] : before[j * cols + k];
      squares += v * v;
    }
    expected_state[k] = 0.9 * expected_state[k] + 0.1 * squares / reduced;
    step[k] = 1 / std::sqrt(std::max(expected_state[k], 1e-10));
    norm_sq += squares;
    new_norm_sq += squares * step[k] * step[k];
  }
  std::vector<double> expected(before);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      expected[r * cols + c] *= step[per_row ? r : c] * std::sqrt(norm_sq) / std::sqrt(new_norm_sq);
    }
  }
  ops::normuon_variance_reduce(g.view(), state.view(), 0.9);
  EXPECT_TRUE(all_close(state, expected_state, 1e-14)) << rows << "x" << cols;
  EXPECT_TRUE(all_close(g, expected, 1e-13)) << rows << "x" << cols;
  EXPECT_NEAR(frobenius(g.as_double()), std::sqrt(norm_sq), 1e-12 * std::sqrt(norm_sq));  // norm kept
}

TEST(NormuonVarianceReduce, TallSquareAndWide) {
  expect_normuon(12, 5, 6);
  expect_normuon(7, 7, 7);
  expect_normuon(4, 9, 8);
}

TEST(CautiousWeightDecayStep, DecaysOnlyWhereTheUpdatePushesTowardZero) {
  HostTensor<double> p({4}), u({4});
  p.data = {1.0, -1.0, 2.0, -2.0};
  u.data = {0.5, 0.5, -0.5, -0.5};  // same sign as p: decay applies at 0 and 3
  ops::cautious_weight_decay_step(p.view(), u.view(), 0.1, 0.2);
  EXPECT_DOUBLE_EQ(p[0], 1.0 - 0.1 * 0.5 - 0.1 * 0.2 * 1.0);
  EXPECT_DOUBLE_EQ(p[1], -1.0 - 0.1 * 0.5);
  EXPECT_DOUBLE_EQ(p[2], 2.0 + 0.1 * 0.5);
  EXPECT_DOUBLE_EQ(p[3], -2.0 + 0.1 * 0.5 - 0.1 * 0.2 * -2.0);
}

// The sum of squares against a naive double loop, in f64 and f32, and the same bits for every thread count.
TEST(SquaredNorm, MatchesANaiveDoubleSumForEveryThreadCount) {
  const HostTensor<double> x64 = random_tensor<double>({123, 457}, 11);
  const HostTensor<float> x32 = x64.cast<float>();
  double naive64 = 0, naive32 = 0;
  for (double v : x64.data)
    naive64 += v * v;
  for (float v : x32.data)
    naive32 += static_cast<double>(v) * v;  // exact squares: 48-bit products
  // Both sum the same double terms, in another order: any order is within (n - 1) 2^-53 of the exact sum,
  // relative (every term is positive); epsilon = 2^-52 gives 2x margin. One term more or less would be ~1/n.
  const double tolerance = static_cast<double>(x64.numel()) * std::numeric_limits<double>::epsilon();
  for (int threads : kThreadCounts) {
    ThreadCount scope(threads);
    HostTensor<double> in64 = x64;
    HostTensor<float> in32 = x32;
    const double norm64 = ops::squared_norm(in64.view());
    const double norm32 = ops::squared_norm(in32.view());
    EXPECT_NEAR(norm64, naive64, tolerance * naive64) << threads << " threads";
    EXPECT_NEAR(norm32, naive32, tolerance * naive32) << threads << " threads";
    HostTensor<double> again = x64;
    ThreadCount one(1);
    EXPECT_EQ(ops::squared_norm(again.view()), norm64) << threads << " threads vs 1";
  }
  HostTensor<float> empty({0, 3});
  EXPECT_EQ(ops::squared_norm(empty.view()), 0.0);
}

TEST(OptimizerOps, ReductionsAreThreadCountIndependent) {
  EXPECT_TRUE(same_bits_for_every_thread_count<float>([] {
    HostTensor<float> x = random_tensor<float>({64, 300}, 9);
    HostTensor<float> state = random_tensor<float>({64, 1}, 10, 0.0, 1.0);
    ops::muon_equilibrate_rows(x.view());
    ops::normalize_frobenius(x.view(), 1.01, 1e-6);
    ops::normuon_variance_reduce(x.view(), state.view(), 0.9);
    ops::rescale_frobenius(x.view(), 8.0, 1e-6);
    return std::vector<HostTensor<float>>{x, state};
  }));
}

}  // namespace
}  // namespace nanoforge::test
