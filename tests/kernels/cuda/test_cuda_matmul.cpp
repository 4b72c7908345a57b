// CUDA matmul (cuBLASLt: bf16 a and b, bf16 or f32 out, fp32 accumulation) against the CPU f32 matmul on
// the same bf16-valued inputs: all four transpose combinations, odd sizes (67 x 129 x 200: no dimension a
// multiple of a tile or of 8 elements), beta = 0 over an out full of NaN (out must not be read), beta = 1
// accumulating into f32 and into bf16, K = 0, views that are not 16-byte aligned, the same bits on a second
// call, and nanochat d20's MLP shapes (4096 tokens, 1280 channels, 5120 hidden) in the three GEMMs of a
// Linear layer. The contract checks run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

using ops::Transpose;

// Products of two bf16 values are exact in fp32 (8 + 8 significant bits), so the error is the accumulation's:
// adding K terms in fp32 in any order is within (K - 1) roundings of the sum of their magnitudes. The CPU
// rounds to nearest (2^-24 per addition); Hopper's tensor cores may truncate inside an MMA (up to 2^-23 per
// addition), so each side gets K * 2^-23 and the bound is K * 2^-22 * sum |a b|. For K = 200 that is ~5e-5
// of sum |a b|, while a dropped or doubled term changes the sum by ~1/K of it and a wrong transpose by O(1).
constexpr double kAccumulationRounding = 4 * kFp32Rounding;

struct GemmCase {
  int64_t m, n, k;
  Transpose transpose_a, transpose_b;
  DType out_dtype;
  double alpha, beta;
  // Elements between each operand's allocation start and its view: 0 keeps 256-byte alignment, an odd
  // count leaves bf16 operands 2-byte and f32 ones 4-byte aligned.
  int64_t offset = 0;
};

// Uniform in [-1, 1), rounded to bf16.
std::vector<float> random_bf16_values(int64_t count, std::mt19937& rng) {
  return rounded_to_bf16(uniform_values(count, -1.0f, 1.0f, rng));
}

struct GemmResult {
  std::vector<float> gpu, cpu, bound;  // bound: the allowed |gpu - cpu| per element
};

// Runs `c` on the GPU and on the CPU (f32, same bf16-valued inputs and initial out) and bounds their
// difference per element from the magnitudes the sum is made of.
GemmResult run_case(const GemmCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const bool ta = c.transpose_a == Transpose::kYes, tb = c.transpose_b == Transpose::kYes;
  const int64_t a_rows = ta ? c.k : c.m, a_cols = ta ? c.m : c.k;
  const int64_t b_rows = tb ? c.n : c.k, b_cols = tb ? c.k : c.n;
  std::vector<float> a = random_bf16_values(a_rows * a_cols, rng);
  std::vector<float> b = random_bf16_values(b_rows * b_cols, rng);
  // beta = 0: the GPU's out starts as NaN (never read), the CPU's as zeros. Otherwise both start from the
  // same values, representable in out's dtype.
  std::vector<float> initial = random_bf16_values(c.m * c.n, rng);
  std::vector<float> gpu_initial = initial;
  if (c.beta == 0) gpu_initial.assign(initial.size(), std::numeric_limits<float>::quiet_NaN());
  if (c.beta == 0) initial.assign(initial.size(), 0.0f);

  // Each operand after c.offset padding elements; the views start past the padding.
  const GpuTensor a_gpu(a, {a_rows, a_cols}, DType::kBF16, c.offset);
  const GpuTensor b_gpu(b, {b_rows, b_cols}, DType::kBF16, c.offset);
  const GpuTensor out_gpu(gpu_initial, {c.m, c.n}, c.out_dtype, c.offset);
  ops::matmul(out_gpu.view, a_gpu.view, c.transpose_a, b_gpu.view, c.transpose_b, c.alpha, c.beta);

  GemmResult result;
  result.gpu = out_gpu.values();
  result.cpu = initial;
  ops::matmul(cpu_view(result.cpu, {c.m, c.n}), cpu_view(a, {a_rows, a_cols}), c.transpose_a,
              cpu_view(b, {b_rows, b_cols}), c.transpose_b, c.alpha, c.beta);
  // sum_k |a_ik b_kj| for every element, from one more CPU GEMM of the magnitudes (its own rounding is far
  // below the bound it feeds).
  std::vector<float> magnitude(static_cast<size_t>(c.m * c.n));
  std::vector<float> a_abs = absolute(a), b_abs = absolute(b);
  ops::matmul(cpu_view(magnitude, {c.m, c.n}), cpu_view(a_abs, {a_rows, a_cols}), c.transpose_a,
              cpu_view(b_abs, {b_rows, b_cols}), c.transpose_b, 1.0, 0.0);
  result.bound.resize(magnitude.size());
  for (size_t i = 0; i < magnitude.size(); ++i) {
    const double products = std::abs(c.alpha) * magnitude[i];
    const double scaled_initial = std::abs(c.beta) * std::abs(initial[i]);
    // The accumulation, then a few fp32 roundings in the epilogue (alpha, beta * out, the sum).
    double bound = static_cast<double>(c.k) * kAccumulationRounding * products +
                   4 * kFp32Rounding * (products + scaled_initial);
    if (c.out_dtype == DType::kBF16) bound += kBf16Rounding * (std::abs(result.cpu[i]) + bound);
    result.bound[i] = static_cast<float>(bound);
  }
  return result;
}

// NaN (an out read with beta = 0) fails too. Element i is row i / n, column i % n.
void expect_close(const GemmResult& result) {
  expect_within(
      result.gpu, result.cpu, [&](size_t i) { return result.bound[i]; }, "out");
}

std::string transpose_name(Transpose a, Transpose b) {
  return std::string(a == Transpose::kYes ? "aT" : "a") + (b == Transpose::kYes ? "_bT" : "_b");
}

class CudaMatmul : public testing::TestWithParam<std::tuple<Transpose, Transpose, DType>> {
 protected:
  void SetUp() override { NANOFORGE_SKIP_WITHOUT_GPU(); }
  Transpose transpose_a() const { return std::get<0>(GetParam()); }
  Transpose transpose_b() const { return std::get<1>(GetParam()); }
  DType out_dtype() const { return std::get<2>(GetParam()); }
};

TEST_P(CudaMatmul, OddSizesWithBetaZeroNeverReadOut) {
  const GemmCase c{67, 129, 200, transpose_a(), transpose_b(), out_dtype(), 1.0, 0.0};
  expect_close(run_case(c, 1));
}

TEST_P(CudaMatmul, AlphaAndBetaOneAccumulate) {
  const GemmCase c{67, 129, 200, transpose_a(), transpose_b(), out_dtype(), 0.5, 1.0};
  expect_close(run_case(c, 2));
}

TEST_P(CudaMatmul, ViewsOneElementPastAlignment) {
  const GemmCase c{48, 40, 72, transpose_a(), transpose_b(), out_dtype(), 1.0, 1.0, /*offset=*/1};
  expect_close(run_case(c, 3));
}

TEST_P(CudaMatmul, TinyAndTileSizedShapes) {
  for (const GemmCase& c : {GemmCase{1, 1, 1, transpose_a(), transpose_b(), out_dtype(), 1.0, 0.0},
                            GemmCase{3, 5, 7, transpose_a(), transpose_b(), out_dtype(), 2.0, 0.0},
                            GemmCase{128, 256, 64, transpose_a(), transpose_b(), out_dtype(), 1.0, 0.0}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
    expect_close(run_case(c, 4));
  }
}

INSTANTIATE_TEST_SUITE_P(TransposesAndOutDtypes, CudaMatmul,
                         testing::Combine(testing::Values(Transpose::kNo, Transpose::kYes),
                                          testing::Values(Transpose::kNo, Transpose::kYes),
                                          testing::Values(DType::kBF16, DType::kF32)),
                         [](const testing::TestParamInfo<CudaMatmul::ParamType>& info) {
                           return transpose_name(std::get<0>(info.param), std::get<1>(info.param)) + "_out_" +
                                  dtype_name(std::get<2>(info.param));
                         });

// A second call reuses the cached plan (same algorithm), and cuBLASLt is deterministic for a fixed one.
TEST(CudaMatmulRepeat, SameBitsOnASecondCall) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const GemmCase c{67, 129, 200, Transpose::kNo, Transpose::kYes, DType::kF32, 1.0, 0.0};
  EXPECT_EQ(run_case(c, 5).gpu, run_case(c, 5).gpu);
}

// K = 0: op(a) op(b) is an empty sum, so out = beta * out, and 0 (not NaN) with beta = 0.
TEST(CudaMatmulEmptyInner, ScalesOrZeroesOut) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const std::vector<float> initial = {1.0f, -2.0f, 3.5f, std::numeric_limits<float>::quiet_NaN()};
  const DeviceBuffer operands(Device::kCuda, 16);  // a (M, 0) and b (0, N) hold no elements
  const DeviceBuffer scaled = upload(std::vector<float>(initial.begin(), initial.begin() + 3));
  ops::matmul(TensorView(scaled.data(), {1, 3}, DType::kF32, Device::kCuda),
              TensorView(operands.data(), {1, 0}, DType::kBF16, Device::kCuda), Transpose::kNo,
              TensorView(operands.data(), {0, 3}, DType::kBF16, Device::kCuda), Transpose::kNo, 1.0, 0.5);
  EXPECT_EQ(download<float>(scaled), (std::vector<float>{0.5f, -1.0f, 1.75f}));
  const DeviceBuffer zeroed = upload(initial);
  ops::matmul(TensorView(zeroed.data(), {2, 2}, DType::kF32, Device::kCuda),
              TensorView(operands.data(), {2, 0}, DType::kBF16, Device::kCuda), Transpose::kNo,
              TensorView(operands.data(), {0, 2}, DType::kBF16, Device::kCuda), Transpose::kNo, 1.0, 0.0);
  EXPECT_EQ(download<float>(zeroed), (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}));
}

// nanochat d20's MLP: x (4096, 1280) -> c_fc (5120, 1280) -> (4096, 5120). The Linear forward y = x W^T, the
// input gradient d_x = d_y W, and the weight gradient d_W += d_y^T x accumulated in f32.
TEST(CudaMatmulModelShapes, LinearForwardAndBackward) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const GemmCase forward{4096, 5120, 1280, Transpose::kNo, Transpose::kYes, DType::kBF16, 1.0, 0.0};
  const GemmCase input_gradient{4096, 1280, 5120, Transpose::kNo, Transpose::kNo, DType::kBF16, 1.0, 0.0};
  const GemmCase weight_gradient{5120, 1280, 4096, Transpose::kYes, Transpose::kNo, DType::kF32, 1.0, 1.0};
  for (const GemmCase& c : {forward, input_gradient, weight_gradient}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
    expect_close(run_case(c, 6));
  }
}

// The checks run on the host before any CUDA call, so these need no GPU (and run in CI). Views that are
// never dereferenced point at made-up addresses.
TEST(CudaMatmulContract, RejectsWrongDtypesShapesAndOverlap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto* base = reinterpret_cast<char*>(uintptr_t{1} << 20);
  const TensorView a(base, {4, 8}, DType::kBF16, Device::kCuda);
  const TensorView b(base + 4096, {8, 16}, DType::kBF16, Device::kCuda);
  const TensorView out(base + 8192, {4, 16}, DType::kF32, Device::kCuda);
  const TensorView a_f32(base, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView out_i32(base + 8192, {4, 16}, DType::kI32, Device::kCuda);
  const TensorView out_wrong(base + 8192, {4, 15}, DType::kF32, Device::kCuda);
  const TensorView out_over_b(base + 4096, {4, 16}, DType::kBF16, Device::kCuda);
  EXPECT_DEATH(ops::matmul(out, a_f32, Transpose::kNo, b, Transpose::kNo, 1, 0),
               "matmul on CUDA: a must be bf16");
  EXPECT_DEATH(ops::matmul(out_i32, a, Transpose::kNo, b, Transpose::kNo, 1, 0),
               "matmul on CUDA: out must be bf16 or f32");
  EXPECT_DEATH(ops::matmul(out_wrong, a, Transpose::kNo, b, Transpose::kNo, 1, 0), "does not give");
  EXPECT_DEATH(ops::matmul(out, a, Transpose::kYes, b, Transpose::kNo, 1, 0), "does not give");
  EXPECT_DEATH(ops::matmul(out_over_b, a, Transpose::kNo, b, Transpose::kNo, 1, 0), "overlaps an input");
}

}  // namespace
}  // namespace nanoforge::gpu_test
