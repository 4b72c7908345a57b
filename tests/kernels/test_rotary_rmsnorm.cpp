// rotary_rmsnorm_forward / _backward: nanochat's rotary embedding (halves, rotation by -theta) with the
// QK-norm that follows it, in one pass. The forward against the formula in ops.h (rotation, then the per-head
// RMSNorm times the scale) with tables longer than the sequence, the backward against central differences,
// and the shape checks.
#include <cmath>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

// cos/sin (max_seq, D/2) of nanochat's angles t * base^(-2i/D); base 10000 as in nanochat's rotary setup.
struct RotaryTables {
  HostTensor<double> cos, sin;
};

RotaryTables rotary_tables(int64_t max_seq, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  RotaryTables tables{HostTensor<double>({max_seq, half}), HostTensor<double>({max_seq, half})};
  for (int64_t t = 0; t < max_seq; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(t) * std::pow(10000.0, -2.0 * static_cast<double>(i) / head_dim);
      tables.cos[t * half + i] = std::cos(angle);
      tables.sin[t * half + i] = std::sin(angle);
    }
  }
  return tables;
}

constexpr double kQKNormScale = 1.2;  // nanochat's q, k = norm(q) * 1.2, norm(k) * 1.2

// r = cat(x1 cos + x2 sin, -x1 sin + x2 cos) per (b, t, head), cos/sin from row t; then each head scaled to
// scale * r / sqrt(mean(r^2) + eps).
std::vector<double> reference(const std::vector<double>& x, const std::vector<int64_t>& shape,
                              const std::vector<double>& cos, const std::vector<double>& sin) {
  const int64_t seq = shape[1], heads = shape[2], head_dim = shape[3], half = head_dim / 2;
  std::vector<double> out(x.size());
  for (int64_t row = 0; row < static_cast<int64_t>(x.size()) / head_dim; ++row) {
    const int64_t t = (row / heads) % seq;
    const double* in = x.data() + row * head_dim;
    double* result = out.data() + row * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const double c = cos[t * half + i], s = sin[t * half + i];
      result[i] = in[i] * c + in[i + half] * s;
      result[i + half] = -in[i] * s + in[i + half] * c;
    }
    double sum_squares = 0;
    for (int64_t i = 0; i < head_dim; ++i)
      sum_squares += result[i] * result[i];
    const double multiplier = kQKNormScale / std::sqrt(sum_squares / head_dim + ops::kRmsNormEps);
    for (int64_t i = 0; i < head_dim; ++i)
      result[i] *= multiplier;
  }
  return out;
}

template <class T>
void check_forward(std::vector<int64_t> shape, double rel) {
  SCOPED_TRACE("head dim " + std::to_string(shape[3]));
  const RotaryTables tables = rotary_tables(shape[1] + 5, shape[3]);  // T_max > T: only rows < T are read
  HostTensor<T> cos = tables.cos.cast<T>(), sin = tables.sin.cast<T>();
  HostTensor<T> x = random_tensor<T>(shape, 60);
  HostTensor<T> rstd({shape[0] * shape[1] * shape[2]});
  const std::vector<double> expected = reference(x.as_double(), shape, cos.as_double(), sin.as_double());
  ops::rotary_rmsnorm_forward(x.view(), rstd.view(), cos.view(), sin.view(), kQKNormScale);
  EXPECT_TRUE(all_close(x, expected, rel));
}

TEST(RotaryRmsNorm, ForwardMatchesReferenceF64) {
  check_forward<double>({2, 7, 3, 8}, kF64Rel);
  check_forward<double>({1, 5, 2, 64}, kF64Rel);
}

// f32: the rotation's two products and a sum, then a sum of D squares, a square root and a product: a few
// roundings of 6e-8 each, and D of them in the sum (D <= 64 here: 64 * 6e-8 = 4e-6 relative on the sum, half
// that on rstd).
TEST(RotaryRmsNorm, ForwardMatchesReferenceF32) {
  check_forward<float>({2, 7, 3, 8}, 1e-5);
  check_forward<float>({1, 5, 2, 64}, 1e-5);
}

// L = sum(w * forward(x)); the backward turns w into d_x in place, from the forward's output and rstd.
void check_backward(std::vector<int64_t> shape) {
  SCOPED_TRACE("head dim " + std::to_string(shape[3]));
  RotaryTables tables = rotary_tables(shape[1] + 2, shape[3]);
  HostTensor<double> x = random_tensor<double>(shape, 61);
  HostTensor<double> w = random_tensor<double>(shape, 62);
  HostTensor<double> out(shape), rstd({shape[0] * shape[1] * shape[2]});
  const Objective objective = [&] {
    out = x;
    ops::rotary_rmsnorm_forward(out.view(), rstd.view(), tables.cos.view(), tables.sin.view(), kQKNormScale);
    return weighted_sum(w, out);
  };
  objective();
  HostTensor<double> d_x = w;
  ops::rotary_rmsnorm_backward(d_x.view(), out.view(), rstd.view(), tables.cos.view(), tables.sin.view(),
                               kQKNormScale);
  EXPECT_TRUE(gradient_matches(x, d_x.as_double(), objective, 63));
}

TEST(RotaryRmsNorm, BackwardMatchesFiniteDifferences) {
  check_backward({2, 6, 3, 8});
  check_backward({1, 4, 2, 64});
}

TEST(RotaryRmsNormContracts, RejectsBadShapes) {
  use_threadsafe_death_tests();
  HostTensor<double> x({1, 6, 2, 8}), odd({1, 6, 2, 7}), rstd({12}), short_rstd({11});
  HostTensor<double> cos({6, 4}), sin({6, 4}), short_cos({5, 4}), short_sin({5, 4}), narrow({6, 3});
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x.view(), rstd.view(), short_cos.view(), short_sin.view(), 1.2),
               "must be \\(>= 6, 4\\)");
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x.view(), rstd.view(), narrow.view(), narrow.view(), 1.2),
               "must be \\(>= 6, 4\\)");
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x.view(), short_rstd.view(), cos.view(), sin.view(), 1.2),
               "rstd .* must hold one value per head");
  EXPECT_DEATH(ops::rotary_rmsnorm_backward(odd.view(), odd.view(), rstd.view(), cos.view(), sin.view(), 1.2),
               "head dim 7 must be even");
  HostTensor<double> flat({6, 16});
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(flat.view(), rstd.view(), cos.view(), sin.view(), 1.2),
               "must have rank 4");
}

}  // namespace
}  // namespace nanoforge::test
