// residual_mix (resid_lambda * x + x0_lambda * x0) and backout (x - lambda * x_backout): forward against the
// formula in double, every gradient against central differences with "written" outputs starting as NaN and
// "added to" outputs starting random, the aliasing the contract allows, and thread-count-independent scalar
// gradients.
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- residual_mix ----

template <class T>
struct MixTensors {
  HostTensor<T> x, x0, resid_lambda, x0_lambda, out;

  MixTensors(std::vector<int64_t> shape, uint64_t seed)
      : x(random_tensor<T>(shape, seed)),
        x0(random_tensor<T>(shape, seed + 1)),
        resid_lambda({1}, static_cast<T>(0.9)),
        x0_lambda({1}, static_cast<T>(0.15)),
        out(shape, static_cast<T>(kNaN)) {}

  void forward() {
    ops::residual_mix_forward(out.view(), x.view(), x0.view(), resid_lambda.view(), x0_lambda.view());
  }
};

template <class T>
void check_residual_mix_forward(double rel) {
  MixTensors<T> t({3, 5, 24}, 130);
  std::vector<double> expected;
  for (int64_t i = 0; i < t.x.numel(); ++i) {
    expected.push_back(double(t.resid_lambda[0]) * double(t.x[i]) + double(t.x0_lambda[0]) * double(t.x0[i]));
  }
  t.forward();
  EXPECT_TRUE(all_close(t.out, expected, rel));
}

// Two products and a sum per element: a couple of ulps (f64 2e-16, f32 6e-8) of the rms.
TEST(ResidualMix, ForwardMatchesReferenceF64) {
  check_residual_mix_forward<double>(1e-15);
}
TEST(ResidualMix, ForwardMatchesReferenceF32) {
  check_residual_mix_forward<float>(1e-6);
}

TEST(ResidualMix, BackwardMatchesFiniteDifferences) {
  MixTensors<double> t({4, 3, 16}, 131);
  HostTensor<double> w = random_tensor<double>(t.x.shape, 132);
  const Objective objective = [&] {
    t.forward();
    return weighted_sum(w, t.out);
  };
  HostTensor<double> d_x(t.x.shape, kNaN);                            // written
  HostTensor<double> d_x0 = random_tensor<double>(t.x.shape, 133);    // added to
  HostTensor<double> d_resid_lambda({1}, 0.5), d_x0_lambda({1}, -2);  // added to
  const HostTensor<double> d_x0_before = d_x0, d_resid_before = d_resid_lambda,
                           d_x0_lambda_before = d_x0_lambda;
  ops::residual_mix_backward(d_x.view(), d_x0.view(), d_resid_lambda.view(), d_x0_lambda.view(), w.view(),
                             t.x.view(), t.x0.view(), t.resid_lambda.view(), t.x0_lambda.view());
  EXPECT_TRUE(gradient_matches(t.x, d_x.as_double(), objective, 134)) << "d_x";
  EXPECT_TRUE(gradient_matches(t.x0, added(d_x0, d_x0_before), objective, 135)) << "d_x0";
  EXPECT_TRUE(gradient_matches(t.resid_lambda, added(d_resid_lambda, d_resid_before), objective, 136))
      << "d_resid_lambda";
  EXPECT_TRUE(gradient_matches(t.x0_lambda, added(d_x0_lambda, d_x0_lambda_before), objective, 137))
      << "d_x0_lambda";

  // d_x may alias d_out: the same bits for every output.
  HostTensor<double> aliased = w, d_x0_again = d_x0_before, d_resid_again({1}, 0.5),
                     d_x0_lambda_again({1}, -2);
  ops::residual_mix_backward(aliased.view(), d_x0_again.view(), d_resid_again.view(),
                             d_x0_lambda_again.view(), aliased.view(), t.x.view(), t.x0.view(),
                             t.resid_lambda.view(), t.x0_lambda.view());
  EXPECT_TRUE(bitwise_equal(aliased, d_x));
  EXPECT_TRUE(bitwise_equal(d_x0_again, d_x0));
  EXPECT_TRUE(bitwise_equal(d_resid_again, d_resid_lambda));
  EXPECT_TRUE(bitwise_equal(d_x0_lambda_again, d_x0_lambda));
}

// 400 rows of 48: the scalar gradients are ordered sums over rows, the same bits for 1, 2 or 3 threads. Run
// in f64 too: a reordering of the double partial sums can vanish when the total is rounded to f32.
template <class T>
void check_residual_mix_backward_thread_independence() {
  MixTensors<T> t({400, 48}, 138);
  const HostTensor<T> w = random_tensor<T>(t.x.shape, 139);
  EXPECT_TRUE(same_bits_for_every_thread_count<T>([&] {
    HostTensor<T> d_x(t.x.shape), d_x0(t.x.shape, T(0.5)), d_resid({1}, T(0.5)), d_x0_lambda({1}, T(-0.5));
    HostTensor<T> grad = w;
    ops::residual_mix_backward(d_x.view(), d_x0.view(), d_resid.view(), d_x0_lambda.view(), grad.view(),
                               t.x.view(), t.x0.view(), t.resid_lambda.view(), t.x0_lambda.view());
    return std::vector<HostTensor<T>>{d_x, d_x0, d_resid, d_x0_lambda};
  }));
}

TEST(ResidualMix, BackwardIsThreadCountIndependentF32) {
  check_residual_mix_backward_thread_independence<float>();
}
TEST(ResidualMix, BackwardIsThreadCountIndependentF64) {
  check_residual_mix_backward_thread_independence<double>();
}

// ---- backout ----

template <class T>
void check_backout_forward(double rel) {
  HostTensor<T> x = random_tensor<T>({3, 5, 24}, 140), x_backout = random_tensor<T>(x.shape, 141);
  HostTensor<T> lambda({1}, static_cast<T>(0.35)), out(x.shape, static_cast<T>(kNaN));
  std::vector<double> expected;
  for (int64_t i = 0; i < x.numel(); ++i)
    expected.push_back(double(x[i]) - double(lambda[0]) * double(x_backout[i]));
  ops::backout_forward(out.view(), x.view(), x_backout.view(), lambda.view());
  EXPECT_TRUE(all_close(out, expected, rel));
  // out may alias x.
  ops::backout_forward(x.view(), x.view(), x_backout.view(), lambda.view());
  EXPECT_TRUE(bitwise_equal(x, out));
}

// One product and a difference per element: a couple of ulps of the rms.
TEST(Backout, ForwardMatchesReferenceF64) {
  check_backout_forward<double>(1e-15);
}
TEST(Backout, ForwardMatchesReferenceF32) {
  check_backout_forward<float>(1e-6);
}

// L = sum(w * out) in x_backout and lambda (d_x_backout written, d_lambda added), and in x, whose gradient
// the contract says is d_out itself.
TEST(Backout, BackwardMatchesFiniteDifferences) {
  HostTensor<double> x = random_tensor<double>({4, 3, 16}, 142),
                     x_backout = random_tensor<double>(x.shape, 143);
  HostTensor<double> lambda({1}, 0.35), out(x.shape);
  HostTensor<double> w = random_tensor<double>(x.shape, 144);
  const Objective objective = [&] {
    ops::backout_forward(out.view(), x.view(), x_backout.view(), lambda.view());
    return weighted_sum(w, out);
  };
  HostTensor<double> d_x_backout(x.shape, kNaN), d_lambda({1}, 1.5);
  const HostTensor<double> d_lambda_before = d_lambda;
  ops::backout_backward(d_x_backout.view(), d_lambda.view(), w.view(), x_backout.view(), lambda.view());
  EXPECT_TRUE(gradient_matches(x_backout, d_x_backout.as_double(), objective, 145)) << "d_x_backout";
  EXPECT_TRUE(gradient_matches(lambda, added(d_lambda, d_lambda_before), objective, 146)) << "d_lambda";
  EXPECT_TRUE(gradient_matches(x, w.as_double(), objective, 147)) << "d_x = d_out";
}

template <class T>
void check_backout_backward_thread_independence() {
  const HostTensor<T> x_backout = random_tensor<T>({400, 48}, 148), w = random_tensor<T>({400, 48}, 149);
  EXPECT_TRUE(same_bits_for_every_thread_count<T>([&] {
    HostTensor<T> d_x_backout(x_backout.shape), d_lambda({1}, T(0.5)), grad = w, snapshot = x_backout;
    HostTensor<T> lambda({1}, T(0.35));
    ops::backout_backward(d_x_backout.view(), d_lambda.view(), grad.view(), snapshot.view(), lambda.view());
    return std::vector<HostTensor<T>>{d_x_backout, d_lambda};
  }));
}

TEST(Backout, BackwardIsThreadCountIndependentF32) {
  check_backout_backward_thread_independence<float>();
}
TEST(Backout, BackwardIsThreadCountIndependentF64) {
  check_backout_backward_thread_independence<double>();
}

TEST(ResidualScalarContracts, RejectsBadShapes) {
  use_threadsafe_death_tests();
  MixTensors<double> t({4, 8}, 150);
  HostTensor<double> two({2}, 1.0), wrong({8, 4});
  EXPECT_DEATH(
      ops::residual_mix_forward(t.out.view(), t.x.view(), t.x0.view(), two.view(), t.x0_lambda.view()),
      "resid_lambda must have one element");
  EXPECT_DEATH(ops::residual_mix_forward(t.out.view(), t.x.view(), wrong.view(), t.resid_lambda.view(),
                                         t.x0_lambda.view()),
               "shapes differ");
  EXPECT_DEATH(ops::backout_forward(t.out.view(), t.x.view(), t.x0.view(), two.view()),
               "lambda must have one element");
  EXPECT_DEATH(ops::backout_backward(wrong.view(), t.resid_lambda.view(), t.out.view(), t.x.view(),
                                     t.resid_lambda.view()),
               "shapes differ");
}

}  // namespace
}  // namespace nanoforge::test
