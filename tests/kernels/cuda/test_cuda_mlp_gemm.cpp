// The MLP's GEMMs with ReLU² on the GPU against the CPU backend on the same bf16-valued inputs, under both
// MLP GEMM settings: our fused GEMM (kernels/cuda/mlp_gemm.cu) and cuBLASLt followed by the ReLU² pass.
// Shapes: 200 x 72 -> 136 (no dimension a multiple of the 128 x 128 tile or of the 32-deep k step:
// zero-filled edges and unstored rows and columns), 256 x 64 -> 256 (whole tiles) and 3 x 8 -> 8 (one partial
// tile), each output starting NaN (never read); the forward keeps only act = relu(x w^T)^2, the backward
// multiplies (d_y w) by 2 sqrt(act). The contract checks name what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

// Accumulating K products in fp32, in any order, is within K roundings of the sum of their magnitudes on
// each side (2^-23 per addition where tensor cores truncate, as in test_cuda_matmul.cpp): K * 2^-22 of
// sum |a b| between the two.
constexpr double kAccumulationRounding = 4 * kFp32Rounding;

struct MlpShape {
  int64_t rows, depth, columns;  // N, K, M: x (N, K), w (M, K) forward; d_y (N, K), w (K, M) backward
};

void PrintTo(const MlpShape& s, std::ostream* out) {
  *out << s.rows << "x" << s.depth << " -> " << s.columns;
}

std::string shape_name(const testing::TestParamInfo<std::tuple<MlpShape, ops::MlpGemm>>& info) {
  const MlpShape& s = std::get<0>(info.param);
  return std::to_string(s.rows) + "x" + std::to_string(s.depth) + "_to_" + std::to_string(s.columns) + "_" +
         ops::mlp_gemm_name(std::get<1>(info.param));
}

std::vector<float> nan_values(int64_t count) {
  return std::vector<float>(static_cast<size_t>(count), std::numeric_limits<float>::quiet_NaN());
}

class CudaMlpGemm : public testing::TestWithParam<std::tuple<MlpShape, ops::MlpGemm>> {
 protected:
  void SetUp() override { NANOFORGE_SKIP_WITHOUT_GPU(); }
  const MlpShape& shape() const { return std::get<0>(GetParam()); }
  ops::MlpGemm gemm() const { return std::get<1>(GetParam()); }
};

// act = relu(pre)^2: a pre off by at most d gives relu off by at most d, its square by (2 relu + d) d. The
// unfused path also rounds pre to bf16 before squaring: d grows by a bf16 rounding of relu.
TEST_P(CudaMlpGemm, ForwardIsTheCpuResultWithinAccumulationAndRounding) {
  const ops::KernelSettings settings{.mlp_gemm = gemm()};
  const auto [N, K, M] = shape();
  std::mt19937 rng(51);
  std::vector<float> x = random_bf16(N * K, 1.0f, rng), w = random_bf16(M * K, 0.5f, rng);
  std::vector<float> act_cpu(static_cast<size_t>(N * M));
  ops::linear_relu_squared_forward(cpu_view(act_cpu, {N, M}), cpu_view(x, {N, K}), cpu_view(w, {M, K}),
                                   settings);

  const GpuTensor x_gpu(x, {N, K}, DType::kBF16, 0), w_gpu(w, {M, K}, DType::kBF16, 0);
  const GpuTensor act_gpu(nan_values(N * M), {N, M}, DType::kBF16, 0);
  ops::linear_relu_squared_forward(act_gpu.view, x_gpu.view, w_gpu.view, settings);

  const std::vector<float> sums = gemm_magnitudes(x, w, {N, K}, {M, K}, ops::Transpose::kYes, N, M);
  int clipped = 0;
  for (float value : act_cpu)
    clipped += value == 0.0f;
  EXPECT_GT(clipped, 0) << "the inputs should exercise relu's clipping";
  expect_within(
      act_gpu.values(), act_cpu,
      [&](size_t i) {
        const double relu = std::sqrt(static_cast<double>(act_cpu[i]));
        const double d = static_cast<double>(K) * kAccumulationRounding * sums[i] +
                         (gemm() == ops::MlpGemm::kCublasLt ? kBf16Rounding * relu : 0.0);
        return relu_squared_bound(relu, d);
      },
      "act");
}

// d_pre = (d_y w) * 2 sqrt(act), act the same bf16 values on both sides: the product's accumulation error
// times 2 sqrt(act), then one bf16 rounding.
TEST_P(CudaMlpGemm, BackwardIsTheCpuResultWithinAccumulationAndRounding) {
  const ops::KernelSettings settings{.mlp_gemm = gemm()};
  const auto [N, K, M] = shape();
  std::mt19937 rng(52);
  std::vector<float> d_y = random_bf16(N * K, 1.0f, rng), w = random_bf16(K * M, 0.5f, rng);
  // act = relu(pre)^2 as the forward stores it: bf16, a quarter of it zero.
  std::vector<float> act = random_bf16(N * M, 1.0f, rng);
  for (size_t i = 0; i < act.size(); ++i)
    act[i] = i % 4 == 1 ? 0.0f : round_to_bf16(act[i] * act[i]);
  std::vector<float> d_pre_cpu(static_cast<size_t>(N * M));
  ops::relu_squared_linear_backward(cpu_view(d_pre_cpu, {N, M}), cpu_view(d_y, {N, K}), cpu_view(w, {K, M}),
                                    cpu_view(act, {N, M}), settings);

  const GpuTensor d_y_gpu(d_y, {N, K}, DType::kBF16, 0), w_gpu(w, {K, M}, DType::kBF16, 0);
  const GpuTensor act_gpu(act, {N, M}, DType::kBF16, 0);
  const GpuTensor d_pre_gpu(nan_values(N * M), {N, M}, DType::kBF16, 0);
  ops::relu_squared_linear_backward(d_pre_gpu.view, d_y_gpu.view, w_gpu.view, act_gpu.view, settings);

  const std::vector<float> sums = gemm_magnitudes(d_y, w, {N, K}, {K, M}, ops::Transpose::kNo, N, M);
  // The unfused path rounds d_y w to bf16 before the pass multiplies: one more bf16 rounding of the product.
  const double extra = gemm() == ops::MlpGemm::kCublasLt ? kBf16Rounding : 0.0;
  expect_within(
      d_pre_gpu.values(), d_pre_cpu,
      [&](size_t i) {
        const double factor = 2 * std::sqrt(static_cast<double>(act[i]));
        const double product = static_cast<double>(K) * kAccumulationRounding * sums[i] * factor;
        return product + (kBf16Rounding + extra) * (std::abs(d_pre_cpu[i]) + product) +
               4 * kFp32Rounding * sums[i] * factor;
      },
      "d_pre");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaMlpGemm,
                         testing::Combine(testing::Values(MlpShape{200, 72, 136}, MlpShape{256, 64, 256},
                                                          MlpShape{3, 8, 8}),
                                          testing::Values(ops::MlpGemm::kFused, ops::MlpGemm::kCublasLt)),
                         shape_name);

// The checks run on the host before any CUDA call, so these need no GPU (and run in CI); the views' addresses
// are never dereferenced.
TEST(CudaMlpGemmContracts, SizesAndAliasesAreNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const ops::KernelSettings fused{.mlp_gemm = ops::MlpGemm::kFused};
  uintptr_t next_address = 1 << 20;
  const auto bf16 = [&](std::initializer_list<int64_t> shape) {
    next_address += 1 << 20;
    return TensorView(reinterpret_cast<void*>(next_address), shape, DType::kBF16, Device::kCuda);
  };
  EXPECT_DEATH(
      ops::linear_relu_squared_forward(bf16({4, 16}), bf16({4, 12}), bf16({16, 12}), fused),
      "linear_relu_squared_forward on CUDA: the MLP GEMM loads 16-byte chunks; K = 12 must be a multiple of "
      "8 and M = 16 of 8");
  EXPECT_DEATH(ops::linear_relu_squared_forward(bf16({4, 16}), bf16({3, 8}), bf16({16, 8}), fused),
               "shapes do not chain");
  EXPECT_DEATH(
      ops::relu_squared_linear_backward(bf16({4, 16}), bf16({4, 8}), bf16({16, 8}), bf16({4, 16}), fused),
      "shapes do not chain");
  const TensorView square = bf16({16, 16}), weights = bf16({16, 16});
  EXPECT_DEATH(ops::linear_relu_squared_forward(square, square, weights, fused), "act must not alias x");
  EXPECT_DEATH(ops::relu_squared_linear_backward(square, weights, weights, square, fused),
               "d_pre must alias neither d_y nor act");
  const TensorView x_f32(reinterpret_cast<void*>(next_address + (1 << 20)), {16, 16}, DType::kF32,
                         Device::kCuda);
  EXPECT_DEATH(ops::linear_relu_squared_forward(square, x_f32, weights, fused), "x must be bf16");
}

}  // namespace
}  // namespace nanoforge::gpu_test
