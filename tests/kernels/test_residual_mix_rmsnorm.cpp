// residual_mix_rmsnorm (residual = resid_lambda * x + x0_lambda * x0, then out = norm(residual)): the forward
// against the formula in double, every gradient against central differences of L = sum(w_r * residual) +
// sum(w_o * out) with "added to" outputs starting random, block 0's x = x0, and thread-count-independent
// lambda gradients.
#include <cmath>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
struct MixNormTensors {
  HostTensor<T> x, x0, resid_lambda, x0_lambda, residual, out, rstd;

  MixNormTensors(std::vector<int64_t> shape, uint64_t seed)
      : x(random_tensor<T>(shape, seed)),
        x0(random_tensor<T>(shape, seed + 1)),
        resid_lambda({1}, static_cast<T>(0.9)),
        x0_lambda({1}, static_cast<T>(0.15)),
        residual(shape, static_cast<T>(kNaN)),
        out(shape, static_cast<T>(kNaN)),
        rstd({x.numel() / shape.back()}, static_cast<T>(kNaN)) {}

  void forward() {
    ops::residual_mix_rmsnorm_forward(residual.view(), out.view(), rstd.view(), x.view(), x0.view(),
                                      resid_lambda.view(), x0_lambda.view(), ops::AmaxOutput());
  }
};

template <class T>
void check_forward(double rel) {
  MixNormTensors<T> t({3, 5, 24}, 130);
  const int64_t width = 24;
  std::vector<double> mixed, normed;
  for (int64_t i = 0; i < t.x.numel(); ++i)
    mixed.push_back(double(t.resid_lambda[0]) * double(t.x[i]) + double(t.x0_lambda[0]) * double(t.x0[i]));
  for (int64_t row = 0; row < t.x.numel() / width; ++row) {
    double sum_squares = 0;
    for (int64_t c = 0; c < width; ++c)
      sum_squares += mixed[row * width + c] * mixed[row * width + c];
    const double rstd = 1.0 / std::sqrt(sum_squares / width + ops::kRmsNormEps);
    for (int64_t c = 0; c < width; ++c)
      normed.push_back(mixed[row * width + c] * rstd);
  }
  t.forward();
  EXPECT_TRUE(all_close(t.residual, mixed, rel)) << "residual";
  EXPECT_TRUE(all_close(t.out, normed, rel)) << "out";
}

// f64: a few ulps (2e-16 each). f32: two products and a sum per element, then a sum of 24 squares, a square
// root and a product: some 30 roundings of 6e-8 at most.
TEST(ResidualMixRmsNorm, ForwardMatchesReferenceF64) {
  check_forward<double>(kF64Rel);
}
TEST(ResidualMixRmsNorm, ForwardMatchesReferenceF32) {
  check_forward<float>(2e-6);
}

TEST(ResidualMixRmsNorm, BackwardMatchesFiniteDifferences) {
  MixNormTensors<double> t({4, 3, 16}, 131);
  HostTensor<double> w_residual = random_tensor<double>(t.x.shape, 132);
  HostTensor<double> w_out = random_tensor<double>(t.x.shape, 133);
  const Objective objective = [&] {
    t.forward();
    const ObjectiveValue a = weighted_sum(w_residual, t.residual), b = weighted_sum(w_out, t.out);
    return ObjectiveValue{a.value + b.value, a.magnitude + b.magnitude};
  };
  objective();
  HostTensor<double> d_residual = w_residual;                         // in: d residual; out: d_x
  HostTensor<double> d_x0 = random_tensor<double>(t.x.shape, 134);    // added to
  HostTensor<double> d_resid_lambda({1}, 0.5), d_x0_lambda({1}, -2);  // added to
  const HostTensor<double> d_x0_before = d_x0, d_resid_before = d_resid_lambda,
                           d_x0_lambda_before = d_x0_lambda;
  ops::residual_mix_rmsnorm_backward(d_residual.view(), d_x0.view(), d_resid_lambda.view(),
                                     d_x0_lambda.view(), w_out.view(), t.out.view(), t.rstd.view(),
                                     t.x.view(), t.x0.view(), t.resid_lambda.view(), t.x0_lambda.view());
  EXPECT_TRUE(gradient_matches(t.x, d_residual.as_double(), objective, 135)) << "d_x";
  EXPECT_TRUE(gradient_matches(t.x0, added(d_x0, d_x0_before), objective, 136)) << "d_x0";
  EXPECT_TRUE(gradient_matches(t.resid_lambda, added(d_resid_lambda, d_resid_before), objective, 137))
      << "d_resid_lambda";
  EXPECT_TRUE(gradient_matches(t.x0_lambda, added(d_x0_lambda, d_x0_lambda_before), objective, 138))
      << "d_x0_lambda";
}

// Block 0 mixes x0 with itself: x and x0 are one tensor, whose gradient is d_x + what d_x0 gained.
TEST(ResidualMixRmsNorm, BackwardWithXBeingX0MatchesFiniteDifferences) {
  MixNormTensors<double> t({5, 12}, 139);
  HostTensor<double> w_residual = random_tensor<double>(t.x.shape, 140);
  HostTensor<double> w_out = random_tensor<double>(t.x.shape, 141);
  const Objective objective = [&] {
    ops::residual_mix_rmsnorm_forward(t.residual.view(), t.out.view(), t.rstd.view(), t.x0.view(),
                                      t.x0.view(), t.resid_lambda.view(), t.x0_lambda.view(),
                                      ops::AmaxOutput());
    const ObjectiveValue a = weighted_sum(w_residual, t.residual), b = weighted_sum(w_out, t.out);
    return ObjectiveValue{a.value + b.value, a.magnitude + b.magnitude};
  };
  objective();
  HostTensor<double> d_residual = w_residual, d_x0(t.x.shape, 0.0), d_resid({1}, 0.0), d_x0_lambda({1}, 0.0);
  ops::residual_mix_rmsnorm_backward(d_residual.view(), d_x0.view(), d_resid.view(), d_x0_lambda.view(),
                                     w_out.view(), t.out.view(), t.rstd.view(), t.x0.view(), t.x0.view(),
                                     t.resid_lambda.view(), t.x0_lambda.view());
  std::vector<double> total = d_residual.as_double();
  for (size_t i = 0; i < total.size(); ++i)
    total[i] += d_x0[static_cast<int64_t>(i)];
  EXPECT_TRUE(gradient_matches(t.x0, total, objective, 142));
}

// 400 rows of 48: the lambda gradients are ordered sums over rows, the same bits for 1, 2 or 3 threads. Run
// in f64 too: a reordering of the double partial sums can vanish when the total is rounded to f32.
template <class T>
void check_thread_independence() {
  MixNormTensors<T> t({400, 48}, 143);
  t.forward();
  const HostTensor<T> w_residual = random_tensor<T>(t.x.shape, 144), w_out = random_tensor<T>(t.x.shape, 145);
  EXPECT_TRUE(same_bits_for_every_thread_count<T>([&] {
    HostTensor<T> d_residual = w_residual, d_out = w_out, d_x0(t.x.shape, T(0.5)), d_resid({1}, T(0.5)),
                  d_x0_lambda({1}, T(-0.5));
    ops::residual_mix_rmsnorm_backward(d_residual.view(), d_x0.view(), d_resid.view(), d_x0_lambda.view(),
                                       d_out.view(), t.out.view(), t.rstd.view(), t.x.view(), t.x0.view(),
                                       t.resid_lambda.view(), t.x0_lambda.view());
    return std::vector<HostTensor<T>>{d_residual, d_x0, d_resid, d_x0_lambda};
  }));
}

TEST(ResidualMixRmsNorm, BackwardIsThreadCountIndependentF32) {
  check_thread_independence<float>();
}
TEST(ResidualMixRmsNorm, BackwardIsThreadCountIndependentF64) {
  check_thread_independence<double>();
}

TEST(ResidualMixRmsNormContracts, RejectsBadShapes) {
  use_threadsafe_death_tests();
  MixNormTensors<double> t({4, 8}, 150);
  HostTensor<double> two({2}, 1.0), wrong({8, 4}), short_rstd({3});
  EXPECT_DEATH(
      ops::residual_mix_rmsnorm_forward(t.residual.view(), t.out.view(), t.rstd.view(), t.x.view(),
                                        t.x0.view(), two.view(), t.x0_lambda.view(), ops::AmaxOutput()),
      "resid_lambda must have one element");
  EXPECT_DEATH(ops::residual_mix_rmsnorm_forward(t.residual.view(), t.out.view(), t.rstd.view(), t.x.view(),
                                                 wrong.view(), t.resid_lambda.view(), t.x0_lambda.view(),
                                                 ops::AmaxOutput()),
               "shapes differ");
  EXPECT_DEATH(ops::residual_mix_rmsnorm_forward(t.residual.view(), t.out.view(), short_rstd.view(),
                                                 t.x.view(), t.x0.view(), t.resid_lambda.view(),
                                                 t.x0_lambda.view(), ops::AmaxOutput()),
               "rstd .* must hold 4 rows");
}

}  // namespace
}  // namespace nanoforge::test
