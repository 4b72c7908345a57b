// rmsnorm_forward / rmsnorm_backward with scale 1 (nanochat's norm) and 1.2 (its QK-norm): forward against
// the formula in double (rows whose mean square is far below eps included), the backward against central
// differences in both Accumulate modes, and the aliasing the contract allows (out = x, d_x = d_out).
#include <cmath>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

using ops::Accumulate;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct RmsNormReference {
  std::vector<double> out, rstd;
};

RmsNormReference reference_rmsnorm(const std::vector<double>& x, int64_t width, double scale) {
  const int64_t rows = static_cast<int64_t>(x.size()) / width;
  RmsNormReference r{std::vector<double>(x.size()), std::vector<double>(static_cast<size_t>(rows))};
  for (int64_t i = 0; i < rows; ++i) {
    double mean_square = 0;
    for (int64_t c = 0; c < width; ++c)
      mean_square += x[i * width + c] * x[i * width + c];
    mean_square /= static_cast<double>(width);
    r.rstd[i] = 1.0 / std::sqrt(mean_square + ops::kRmsNormEps);
    for (int64_t c = 0; c < width; ++c)
      r.out[i * width + c] = scale * x[i * width + c] * r.rstd[i];
  }
  return r;
}

// x (2, 9, 96) whose rows 3 and 10 are scaled to ~1e-4, where eps (1.2e-7) outweighs mean(x^2) (~3e-9).
template <class T>
HostTensor<T> rmsnorm_input(uint64_t seed) {
  HostTensor<double> x = random_tensor<double>({2, 9, 96}, seed, -2, 2);
  for (int64_t row : {3, 10}) {
    for (int64_t c = 0; c < 96; ++c)
      x[row * 96 + c] *= 1e-4;
  }
  return x.cast<T>();
}

template <class T>
void check_rmsnorm_forward(double scale, double rel) {
  SCOPED_TRACE("scale " + std::to_string(scale));
  HostTensor<T> x = rmsnorm_input<T>(50);
  HostTensor<T> out(x.shape, T{-5}), rstd({2, 9}, T{-5});
  const RmsNormReference expected = reference_rmsnorm(x.as_double(), 96, scale);
  ops::rmsnorm_forward(out.view(), rstd.view(), x.view(), scale, ops::AmaxOutput());
  EXPECT_TRUE(all_close(out, expected.out, rel));
  EXPECT_TRUE(all_close(rstd, expected.rstd, rel));
  // In place (out aliases x): the same values, bitwise.
  HostTensor<T> in_place = x, rstd_in_place({2, 9});
  ops::rmsnorm_forward(in_place.view(), rstd_in_place.view(), in_place.view(), scale, ops::AmaxOutput());
  EXPECT_TRUE(bitwise_equal(in_place, out));
  EXPECT_TRUE(bitwise_equal(rstd_in_place, rstd));
}

TEST(RmsNorm, ForwardMatchesReferenceF64) {
  for (double scale : {1.0, 1.2})
    check_rmsnorm_forward<double>(scale, kF64Rel);
}

// f32: a sum of 96 squares rounded at 6e-8 each, worst case ~96 * 6e-8 = 6e-6 relative, halved by the sqrt.
TEST(RmsNorm, ForwardMatchesReferenceF32) {
  for (double scale : {1.0, 1.2})
    check_rmsnorm_forward<float>(scale, 1e-5);
}

// L = sum(w * rmsnorm(x)) differentiated in x, with d_x written (starts NaN) or added (starts random).
void check_rmsnorm_backward(double scale, Accumulate mode) {
  SCOPED_TRACE("scale " + std::to_string(scale) + (mode == Accumulate::kYes ? " accumulate" : " write"));
  HostTensor<double> x = random_tensor<double>({5, 3, 40}, 51, -2, 2);
  HostTensor<double> w = random_tensor<double>(x.shape, 52);
  HostTensor<double> out(x.shape), rstd({5, 3});
  const Objective objective = [&] {
    ops::rmsnorm_forward(out.view(), rstd.view(), x.view(), scale, ops::AmaxOutput());
    return weighted_sum(w, out);
  };
  objective();
  HostTensor<double> d_x =
      mode == Accumulate::kYes ? random_tensor<double>(x.shape, 53) : HostTensor<double>(x.shape, kNaN);
  const HostTensor<double> before = d_x;
  ops::rmsnorm_backward(d_x.view(), w.view(), out.view(), rstd.view(), scale, mode);
  const std::vector<double> gradient = mode == Accumulate::kYes ? added(d_x, before) : d_x.as_double();
  EXPECT_TRUE(gradient_matches(x, gradient, objective, 54));

  if (mode == Accumulate::kNo) {
    // d_x may alias d_out when written.
    HostTensor<double> aliased = w;
    ops::rmsnorm_backward(aliased.view(), aliased.view(), out.view(), rstd.view(), scale, mode);
    EXPECT_TRUE(bitwise_equal(aliased, d_x));
  }
}

TEST(RmsNorm, BackwardWritesGradientMatchingFiniteDifferences) {
  for (double scale : {1.0, 1.2})
    check_rmsnorm_backward(scale, Accumulate::kNo);
}

TEST(RmsNorm, BackwardAccumulatesGradientMatchingFiniteDifferences) {
  for (double scale : {1.0, 1.2})
    check_rmsnorm_backward(scale, Accumulate::kYes);
}

// The f32 backward against the f64 one on the same (f32-representable) inputs: dot products of 40 terms and
// a handful of roundings per element, ~1e-6 relative.
TEST(RmsNorm, BackwardF32MatchesF64) {
  HostTensor<float> x = random_tensor<float>({6, 40}, 55, -2, 2), w = random_tensor<float>({6, 40}, 56);
  HostTensor<double> x64 = x.cast<double>(), w64 = w.cast<double>();
  HostTensor<float> out(x.shape), rstd({6}), d_x(x.shape);
  HostTensor<double> out64(x.shape), rstd64({6}), d_x64(x.shape);
  ops::rmsnorm_forward(out.view(), rstd.view(), x.view(), 1.2, ops::AmaxOutput());
  ops::rmsnorm_forward(out64.view(), rstd64.view(), x64.view(), 1.2, ops::AmaxOutput());
  ops::rmsnorm_backward(d_x.view(), w.view(), out.view(), rstd.view(), 1.2, Accumulate::kNo);
  ops::rmsnorm_backward(d_x64.view(), w64.view(), out64.view(), rstd64.view(), 1.2, Accumulate::kNo);
  EXPECT_TRUE(all_close(d_x, d_x64.as_double(), 1e-5));
}

TEST(RmsNormContracts, RejectsMismatchedShapes) {
  use_threadsafe_death_tests();
  HostTensor<double> x({4, 8}), out({4, 7}), rstd({4}), short_rstd({3});
  EXPECT_DEATH(ops::rmsnorm_forward(out.view(), rstd.view(), x.view(), 1.0, ops::AmaxOutput()),
               "shapes differ");
  EXPECT_DEATH(ops::rmsnorm_forward(x.view(), short_rstd.view(), x.view(), 1.0, ops::AmaxOutput()),
               "must hold 4 rows");
  EXPECT_DEATH(ops::rmsnorm_backward(x.view(), out.view(), x.view(), rstd.view(), 1.0, Accumulate::kNo),
               "shapes differ");
}

}  // namespace
}  // namespace nanoforge::test
