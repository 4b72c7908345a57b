// rotary_forward / rotary_backward in nanochat's convention (halves, rotation by -theta): the forward against
// the formula in ops.h with tables longer than the sequence, the backward (the transpose rotation) against
// central differences, and the table-shape checks.
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

// out = cat(x1 cos + x2 sin, -x1 sin + x2 cos) per (b, t, head), cos/sin from row t.
std::vector<double> reference_rotary(const std::vector<double>& x, const std::vector<int64_t>& shape,
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
  }
  return out;
}

template <class T>
void check_rotary_forward(std::vector<int64_t> shape, double rel) {
  SCOPED_TRACE("head dim " + std::to_string(shape[3]));
  const RotaryTables tables = rotary_tables(shape[1] + 5, shape[3]);  // T_max > T: only rows < T are read
  HostTensor<T> cos = tables.cos.cast<T>(), sin = tables.sin.cast<T>();
  HostTensor<T> x = random_tensor<T>(shape, 60);
  const std::vector<double> expected =
      reference_rotary(x.as_double(), shape, cos.as_double(), sin.as_double());
  ops::rotary_forward(x.view(), cos.view(), sin.view());
  EXPECT_TRUE(all_close(x, expected, rel));
}

TEST(Rotary, ForwardMatchesReferenceF64) {
  check_rotary_forward<double>({2, 7, 3, 8}, kF64Rel);
  check_rotary_forward<double>({1, 5, 2, 64}, kF64Rel);
}

// f32: two products and a sum per element, a few roundings of 6e-8.
TEST(Rotary, ForwardMatchesReferenceF32) {
  check_rotary_forward<float>({2, 7, 3, 8}, 1e-6);
  check_rotary_forward<float>({1, 5, 2, 64}, 1e-6);
}

// L = sum(w * rotary(x)); the backward rotates w in place into d_x.
void check_rotary_backward(std::vector<int64_t> shape) {
  SCOPED_TRACE("head dim " + std::to_string(shape[3]));
  RotaryTables tables = rotary_tables(shape[1] + 2, shape[3]);
  HostTensor<double> x = random_tensor<double>(shape, 61);
  HostTensor<double> w = random_tensor<double>(shape, 62);
  HostTensor<double> rotated(shape);
  const Objective objective = [&] {
    rotated = x;
    ops::rotary_forward(rotated.view(), tables.cos.view(), tables.sin.view());
    return weighted_sum(w, rotated);
  };
  HostTensor<double> d_x = w;
  ops::rotary_backward(d_x.view(), tables.cos.view(), tables.sin.view());
  EXPECT_TRUE(gradient_matches(x, d_x.as_double(), objective, 63));
}

TEST(Rotary, BackwardMatchesFiniteDifferences) {
  check_rotary_backward({2, 6, 3, 8});
  check_rotary_backward({1, 4, 2, 64});
}

TEST(RotaryContracts, RejectsBadTables) {
  use_threadsafe_death_tests();
  HostTensor<double> x({1, 6, 2, 8}), odd({1, 6, 2, 7});
  HostTensor<double> cos({6, 4}), sin({6, 4}), short_cos({5, 4}), short_sin({5, 4}), narrow({6, 3});
  EXPECT_DEATH(ops::rotary_forward(x.view(), short_cos.view(), short_sin.view()), "must be \\(>= 6, 4\\)");
  EXPECT_DEATH(ops::rotary_forward(x.view(), narrow.view(), narrow.view()), "must be \\(>= 6, 4\\)");
  EXPECT_DEATH(ops::rotary_backward(odd.view(), cos.view(), sin.view()), "head dim 7 must be even");
  HostTensor<double> flat({6, 16});
  EXPECT_DEATH(ops::rotary_forward(flat.view(), cos.view(), sin.view()), "must have rank 4");
}

}  // namespace
}  // namespace nanoforge::test
