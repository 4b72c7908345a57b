// The MLP's GEMMs with their ReLU² (linear_relu_squared_forward, relu_squared_linear_backward) on the CPU:
// the forward against a double reference written from the formula, the backward's gradient of relu's input
// against central differences of the layer pair act = relu(pre)², y = act w^T, and the aliasing contracts.
// (On the GPU the same ops run our fused GEMM: tests/kernels/cuda/test_cuda_mlp_gemm.cpp.)
#include <algorithm>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

TEST(MlpReluSquared, ForwardIsReluOfTheLinearLayerSquared) {
  const int64_t N = 7, K = 24, M = 40;
  HostTensor<double> x = random_tensor<double>({N, K}, 90), w = random_tensor<double>({M, K}, 91);
  HostTensor<double> act({N, M}, std::numeric_limits<double>::quiet_NaN());
  ops::linear_relu_squared_forward(act.view(), x.view(), w.view(), {});
  std::vector<double> expected;
  int positive = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      double pre = 0;
      for (int64_t k = 0; k < K; ++k)
        pre += x[n * K + k] * w[m * K + k];
      positive += pre > 0;
      expected.push_back(std::max(pre, 0.0) * std::max(pre, 0.0));
    }
  }
  // Both sides do K products and sums in f64 (orders differ: kF64Rel); about half the inputs are clipped.
  EXPECT_TRUE(all_close(act, expected, kF64Rel));
  EXPECT_GT(positive, N * M / 4);
  EXPECT_LT(positive, 3 * N * M / 4);
}

// L = sum(weights * y), y = act w^T, act = relu(pre)^2: d_pre from the op against central differences in pre.
TEST(MlpReluSquared, BackwardMatchesFiniteDifferencesThroughBothLayers) {
  const int64_t N = 5, M = 24, C = 16;
  HostTensor<double> pre = random_tensor<double>({N, M}, 92);  // no exact zeros: relu's kink
  HostTensor<double> w = random_tensor<double>({C, M}, 93), weights = random_tensor<double>({N, C}, 94);
  HostTensor<double> act({N, M}), y({N, C});
  const Objective objective = [&] {
    ops::relu_squared_forward(act.view(), pre.view(), ops::AmaxOutput());
    ops::matmul(y.view(), act.view(), ops::Transpose::kNo, w.view(), ops::Transpose::kYes, 1.0, 0.0);
    return weighted_sum(weights, y);
  };
  objective();
  HostTensor<double> d_pre({N, M}, std::numeric_limits<double>::quiet_NaN());
  ops::relu_squared_linear_backward(d_pre.view(), weights.view(), w.view(), act.view(), {});
  EXPECT_TRUE(gradient_matches(pre, d_pre.as_double(), objective, 95, pre.numel()));
}

TEST(MlpReluSquaredContracts, RefusesAliasesThatWouldReadOverwrittenValues) {
  use_threadsafe_death_tests();
  HostTensor<double> square({8, 8}), w({8, 8}), other({8, 8});
  EXPECT_DEATH(ops::linear_relu_squared_forward(square.view(), square.view(), w.view(), {}),
               "act must not alias x");
  EXPECT_DEATH(ops::relu_squared_linear_backward(square.view(), square.view(), w.view(), other.view(), {}),
               "d_pre must alias neither d_y nor act");
  EXPECT_DEATH(ops::relu_squared_linear_backward(square.view(), other.view(), w.view(), square.view(), {}),
               "d_pre must alias neither d_y nor act");
}

}  // namespace
}  // namespace nanoforge::test
