// relu_squared_forward / relu_squared_backward: exact elementwise results (one correctly rounded product per
// element; the backward's 2 sqrt(out) is 2 relu(x) exactly), in place as the contract allows, and the
// backward, given the forward's output, against central differences.
#include <algorithm>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

// x in [-1, 1) with some exact zeros (relu's kink).
template <class T>
HostTensor<T> relu_input(std::vector<int64_t> shape, uint64_t seed) {
  HostTensor<T> x = random_tensor<T>(std::move(shape), seed);
  for (int64_t i = 0; i < x.numel(); i += 17)
    x[i] = T{0};
  return x;
}

template <class T>
void check_relu_squared_formula() {
  HostTensor<T> x = relu_input<T>({7, 45}, 80);
  HostTensor<T> out(x.shape, T{-3});
  std::vector<double> expected;
  // The double product of two T values is exact for f32; rounding it to T is the correctly rounded product.
  for (T value : x.data) {
    const double r = std::max(double(value), 0.0);
    expected.push_back(static_cast<T>(r * r));
  }
  ops::relu_squared_forward(out.view(), x.view(), ops::AmaxOutput());
  EXPECT_TRUE(all_close(out, expected, 0));  // one correctly rounded product per element: exact

  // d_x = 2 sqrt(out) d_out = 2 relu(x) d_out: sqrt(fl(r r)) is r exactly unless r r underflows (|r| below
  // 2^-63 in f32, none of these inputs), and 2 r is exact, so one correctly rounded product per element (0 at
  // the kink).
  HostTensor<T> d_out = random_tensor<T>(x.shape, 84), d_x(x.shape, T{-3});
  std::vector<double> expected_grad;
  for (int64_t i = 0; i < x.numel(); ++i) {
    expected_grad.push_back(static_cast<T>(2 * std::max(double(x[i]), 0.0) * double(d_out[i])));
  }
  ops::relu_squared_backward(d_x.view(), d_out.view(), out.view());
  EXPECT_TRUE(all_close(d_x, expected_grad, 0));

  // out may alias x.
  ops::relu_squared_forward(x.view(), x.view(), ops::AmaxOutput());
  EXPECT_TRUE(bitwise_equal(x, out));
}

TEST(ReluSquared, ForwardAndBackwardMatchFormulaF64) {
  check_relu_squared_formula<double>();
}
TEST(ReluSquared, ForwardAndBackwardMatchFormulaF32) {
  check_relu_squared_formula<float>();
}

// L = sum(w * relu(x)^2); d_x is written (starts NaN), and may alias d_out.
TEST(ReluSquared, BackwardMatchesFiniteDifferences) {
  HostTensor<double> x =
      random_tensor<double>({6, 40}, 81);  // no exact zeros: the kink is not differentiable
  HostTensor<double> w = random_tensor<double>(x.shape, 82);
  HostTensor<double> out(x.shape);
  const Objective objective = [&] {
    ops::relu_squared_forward(out.view(), x.view(), ops::AmaxOutput());
    return weighted_sum(w, out);
  };
  HostTensor<double> d_x(x.shape, std::numeric_limits<double>::quiet_NaN());
  objective();
  HostTensor<double> forward_out = out;
  ops::relu_squared_backward(d_x.view(), w.view(), forward_out.view());
  EXPECT_TRUE(gradient_matches(x, d_x.as_double(), objective, 83, x.numel()));

  HostTensor<double> aliased = w;
  ops::relu_squared_backward(aliased.view(), aliased.view(), forward_out.view());
  EXPECT_TRUE(bitwise_equal(aliased, d_x));
}

TEST(ReluSquaredContracts, RejectsMismatchedShapes) {
  use_threadsafe_death_tests();
  HostTensor<double> x({4, 8}), out({8, 4});
  EXPECT_DEATH(ops::relu_squared_forward(out.view(), x.view(), ops::AmaxOutput()), "shapes differ");
  EXPECT_DEATH(ops::relu_squared_backward(x.view(), out.view(), x.view()), "shapes differ");
}

}  // namespace
}  // namespace nanoforge::test
