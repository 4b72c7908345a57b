// backout (x - lambda * x_backout): forward against the formula in double, every gradient against central
// differences with "written" outputs starting as NaN and "added to" outputs starting random, the aliasing the
// contract allows, and a thread-count-independent lambda gradient.
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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

TEST(BackoutContracts, RejectsBadShapes) {
  use_threadsafe_death_tests();
  HostTensor<double> x({4, 8}), out({4, 8}), snapshot({4, 8}), lambda({1}, 0.5);
  HostTensor<double> two({2}, 1.0), wrong({8, 4});
  EXPECT_DEATH(ops::backout_forward(out.view(), x.view(), snapshot.view(), two.view()),
               "lambda must have one element");
  EXPECT_DEATH(ops::backout_backward(wrong.view(), lambda.view(), out.view(), x.view(), lambda.view()),
               "shapes differ");
}

}  // namespace
}  // namespace nanoforge::test
