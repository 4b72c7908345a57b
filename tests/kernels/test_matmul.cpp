// matmul against a triple loop in double: every transpose combination, alpha and beta, shapes where one
// dimension is 1 (BLAS may take a GEMV path there), and the shape checks.
#include <cmath>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

using ops::Transpose;

struct MatmulCase {
  Transpose transpose_a, transpose_b;
  int64_t m, k, n;
  double alpha, beta;
};

std::string describe(const MatmulCase& c) {
  return "a" + std::string(c.transpose_a == Transpose::kYes ? "^T" : "") + " b" +
         std::string(c.transpose_b == Transpose::kYes ? "^T" : "") + " m=" + std::to_string(c.m) +
         " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta);
}

// out = alpha * op(a) @ op(b) + beta * out, with op(a) (m, k) and op(b) (k, n).
std::vector<double> reference_matmul(const MatmulCase& c, const std::vector<double>& a,
                                     const std::vector<double>& b, const std::vector<double>& out) {
  const bool ta = c.transpose_a == Transpose::kYes, tb = c.transpose_b == Transpose::kYes;
  std::vector<double> result(static_cast<size_t>(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double a_ip = ta ? a[p * c.m + i] : a[i * c.k + p];
        const double b_pj = tb ? b[j * c.k + p] : b[p * c.n + j];
        sum += a_ip * b_pj;
      }
      result[i * c.n + j] = c.alpha * sum + c.beta * out[i * c.n + j];
    }
  }
  return result;
}

template <class T>
void check_matmul(const MatmulCase& c, double rel) {
  SCOPED_TRACE(describe(c));
  const bool ta = c.transpose_a == Transpose::kYes, tb = c.transpose_b == Transpose::kYes;
  HostTensor<T> a =
      random_tensor<T>(ta ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k}, 10);
  HostTensor<T> b =
      random_tensor<T>(tb ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n}, 11);
  HostTensor<T> out = random_tensor<T>({c.m, c.n}, 12);
  const std::vector<double> expected = reference_matmul(c, a.as_double(), b.as_double(), out.as_double());
  ops::matmul(out.view(), a.view(), c.transpose_a, b.view(), c.transpose_b, c.alpha, c.beta);
  EXPECT_TRUE(all_close(out, expected, rel));
}

std::vector<MatmulCase> all_cases() {
  std::vector<MatmulCase> cases;
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      for (double beta : {0.0, -0.5})
        cases.push_back({ta, tb, 13, 37, 21, 0.75, beta});
      cases.push_back({ta, tb, 1, 29, 17, 1.0, 0.25});  // one row: a GEMV in disguise
      cases.push_back({ta, tb, 19, 23, 1, -1.5, 1.0});  // one column
      cases.push_back({ta, tb, 8, 1, 9, 2.0, 0.0});     // an outer product
    }
  }
  return cases;
}

TEST(Matmul, ForwardMatchesReferenceF64) {
  for (const MatmulCase& c : all_cases())
    check_matmul<double>(c, kF64Rel);
}

// f32: sums of <= 37 products, each rounded at 6e-8: worst case ~37 * 6e-8 = 2e-6 of the rms.
TEST(Matmul, ForwardMatchesReferenceF32) {
  for (const MatmulCase& c : all_cases())
    check_matmul<float>(c, 1e-5);
}

// A Linear layer writes into arena memory that holds stale values, possibly NaN: with beta = 0 the old
// contents must not leak into the result (the BLAS convention; ops.h writes the formula as beta * out).
TEST(Matmul, BetaZeroIgnoresStaleOutput) {
  HostTensor<double> a = random_tensor<double>({6, 5}, 20), b = random_tensor<double>({4, 5}, 21);
  HostTensor<double> out({6, 4}, std::numeric_limits<double>::quiet_NaN());
  const MatmulCase c{Transpose::kNo, Transpose::kYes, 6, 5, 4, 1.0, 0.0};
  const std::vector<double> expected =
      reference_matmul(c, a.as_double(), b.as_double(), std::vector<double>(24, 0));
  ops::matmul(out.view(), a.view(), Transpose::kNo, b.view(), Transpose::kYes, 1.0, 0.0);
  EXPECT_TRUE(all_close(out, expected, kF64Rel));
}

TEST(MatmulContracts, RejectsMismatchedShapes) {
  use_threadsafe_death_tests();
  HostTensor<double> a({4, 5}), b({6, 3}), out({4, 3}), wrong_out({4, 4}), a3({2, 4, 5});
  HostTensor<float> a_f32({4, 5});
  // Inner dimensions 5 and 6 differ.
  EXPECT_DEATH(ops::matmul(out.view(), a.view(), Transpose::kNo, b.view(), Transpose::kNo, 1, 0),
               "does not give");
  // a^T (5, 4) @ b (6, 3): 4 vs 6.
  EXPECT_DEATH(ops::matmul(out.view(), a.view(), Transpose::kYes, b.view(), Transpose::kNo, 1, 0),
               "does not give");
  HostTensor<double> b_ok({5, 3});  // a @ b_ok is (4, 3), not (4, 4)
  EXPECT_DEATH(ops::matmul(wrong_out.view(), a.view(), Transpose::kNo, b_ok.view(), Transpose::kNo, 1, 0),
               "does not give");
  EXPECT_DEATH(ops::matmul(out.view(), a3.view(), Transpose::kNo, b_ok.view(), Transpose::kNo, 1, 0),
               "must have rank 2");
  EXPECT_DEATH(ops::matmul(out.view(), a_f32.view(), Transpose::kNo, b_ok.view(), Transpose::kNo, 1, 0),
               "share a float dtype");
}

}  // namespace
}  // namespace nanoforge::test
