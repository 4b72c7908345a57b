// CUDA elementwise layers (bf16 activations, 1-element f32 lambdas on the device) against the CPU ops in fp32
// on the same bf16-valued inputs: ReLU^2 and the backout, forward and backward, with the
// aliasing the contracts allow. Sizes: 7 x 77 (a tail after the last 16-byte pack), 37 x 1280 (whole packs)
// and 4099 x 1280 (5.2M elements: more than one pack per thread of the lambda reductions' largest grid), each
// as views at the start of their buffers and one element in (no packs), with the elements around every
// written view checked untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

// A bf16 device copy of `values` as (rows, channels), `offset` elements into its buffer and followed by guard
// elements. values() reads it back and checks that the elements around it kept their bits.
class Bf16OnGpu {
 public:
  Bf16OnGpu(const std::vector<float>& values, const ActivationShape& shape)
      : shape_(shape), padded_(to_bf16_bits(values), shape.offset, DType::kBF16) {}

  TensorView view() const { return padded_.view({shape_.rows, shape_.channels}); }
  std::vector<float> values() const { return from_bf16_bits(padded_.contents()); }

 private:
  ActivationShape shape_;
  PaddedOnGpu<uint16_t> padded_;
};

// A 1-element f32 device tensor (a lambda or its gradient).
class ScalarOnGpu {
 public:
  explicit ScalarOnGpu(float value) : buffer_(upload(std::vector<float>{value})) {}
  TensorView view() const { return cuda_view(buffer_, {1}, DType::kF32); }
  float value() const { return download<float>(buffer_)[0]; }

 private:
  DeviceBuffer buffer_;
};

TensorView cpu_view(std::vector<float>& values, const ActivationShape& s) {
  return TensorView(values.data(), {s.rows, s.channels}, DType::kF32, Device::kCpu);
}
TensorView cpu_scalar(float& value) {
  return TensorView(&value, {1}, DType::kF32, Device::kCpu);
}

// Standard normal values rounded to bf16, a few of them exact zeros (relu's kink).
std::vector<float> normal_bf16(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = i % 97 == 5 ? 0.0f : round_to_bf16(normal(rng));
  return values;
}

// Values in [0.25, 2) rounded to bf16: products of two of them are positive, so a sum over all elements has
// no cancellation and its tolerance (relative to the sum of magnitudes) is also relative to the sum itself.
std::vector<float> positive_bf16(int64_t count, std::mt19937& rng) {
  return rounded_to_bf16(uniform_values(count, 0.25f, 2.0f, rng));
}

void expect_same_values(const std::vector<float>& actual, const std::vector<float>& expected,
                        const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_EQ(std::memcmp(&actual[i], &expected[i], sizeof(float)), 0) << what << ": element " << i;
}

// Every element of `gpu` is `cpu` rounded to bf16: for results that are exact in fp32 on both sides (or one
// fp32 rounding of the same operation), so the only difference is the GPU's final rounding.
void expect_cpu_rounded(const std::vector<float>& gpu, const std::vector<float>& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i)
    ASSERT_EQ(gpu[i], round_to_bf16(cpu[i])) << what << ": element " << i << ", CPU fp32 " << cpu[i];
}

// Sum over all elements of |a * b|: bounds the rounding error of any fp32 summation of the products.
double sum_of_magnitudes(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += std::abs(static_cast<double>(a[i]) * b[i]);
  return sum;
}

// Tolerance for a lambda gradient, initial + sum over all elements of a product, between the GPU and the CPU.
// An fp32 sum in any order is within (depth) * 2^-24 of the exact one, relative to the sum of magnitudes,
// where depth is the longest chain of additions: on the CPU one row's dot product (channels long; the rows
// are then added in double), on the GPU one thread's products (at most ceil(numel / 8 / 2^18) packs of 8 for
// a 1024 x 256-thread grid, under 32 here) then the block's tree (10 levels; the partials are added in
// double). 256 covers the GPU for every size here. Then each side rounds the total to f32 and adds it to the
// gradient.
double lambda_tolerance(int64_t channels, double magnitudes, double result) {
  return static_cast<double>(channels + 256) * kFp32Rounding * magnitudes +
         4 * kFp32Rounding * std::abs(result);
}

class CudaElementwise : public testing::TestWithParam<ActivationShape> {
 protected:
  const ActivationShape& shape() const { return GetParam(); }
};

TEST_P(CudaElementwise, ReluSquaredIsTheCpuResultRounded) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const ActivationShape& s = shape();
  std::mt19937 rng(41);
  std::vector<float> x = normal_bf16(s.numel(), rng);
  std::vector<float> d_out = normal_bf16(s.numel(), rng);
  // relu(x)^2 of bf16 values is exact in fp32 on both sides. The backward reads the forward's output as the
  // GPU stores it (bf16) on both sides, where both compute 2 sqrt(out) d_out with the same fp32 operations.
  std::vector<float> out_cpu(x.size()), d_x_cpu(x.size());
  ops::relu_squared_forward(cpu_view(out_cpu, s), cpu_view(x, s), ops::AmaxOutput());
  std::vector<float> stored_out = rounded_to_bf16(out_cpu);
  ops::relu_squared_backward(cpu_view(d_x_cpu, s), cpu_view(d_out, s), cpu_view(stored_out, s));

  const Bf16OnGpu x_gpu(x, s), d_out_gpu(d_out, s);
  const Bf16OnGpu out_gpu(std::vector<float>(x.size(), 3.0f), s),
      d_x_gpu(std::vector<float>(x.size(), 3.0f), s);
  ops::relu_squared_forward(out_gpu.view(), x_gpu.view(), ops::AmaxOutput());
  ops::relu_squared_backward(d_x_gpu.view(), d_out_gpu.view(), out_gpu.view());
  const std::vector<float> out = out_gpu.values();
  const std::vector<float> d_x = d_x_gpu.values();
  expect_cpu_rounded(out, out_cpu, "relu_squared_forward");
  expect_cpu_rounded(d_x, d_x_cpu, "relu_squared_backward");

  // out may alias x, d_x may alias d_out: the same bits in place.
  const Bf16OnGpu in_place(x, s);
  ops::relu_squared_forward(in_place.view(), in_place.view(), ops::AmaxOutput());
  expect_same_values(in_place.values(), out, "relu_squared_forward in place");
  const Bf16OnGpu gradient_in_place(d_out, s);
  ops::relu_squared_backward(gradient_in_place.view(), gradient_in_place.view(), out_gpu.view());
  expect_same_values(gradient_in_place.values(), d_x, "relu_squared_backward in place");
}

TEST_P(CudaElementwise, BackoutMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const ActivationShape& s = shape();
  std::mt19937 rng(43);
  std::vector<float> x = normal_bf16(s.numel(), rng);
  std::vector<float> x_backout = positive_bf16(s.numel(), rng);
  std::vector<float> d_out = positive_bf16(s.numel(), rng);
  float lambda = 0.2f;  // nanochat's initial backout lambda
  const float d_lambda_initial = 0.75f;

  std::vector<float> out_cpu(x.size()), d_x_backout_cpu(x.size());
  float d_lambda_cpu = d_lambda_initial;
  ops::backout_forward(cpu_view(out_cpu, s), cpu_view(x, s), cpu_view(x_backout, s), cpu_scalar(lambda));
  ops::backout_backward(cpu_view(d_x_backout_cpu, s), cpu_scalar(d_lambda_cpu), cpu_view(d_out, s),
                        cpu_view(x_backout, s), cpu_scalar(lambda));

  const Bf16OnGpu x_gpu(x, s), x_backout_gpu(x_backout, s), d_out_gpu(d_out, s);
  const ScalarOnGpu lambda_gpu(lambda);
  const Bf16OnGpu out_gpu(std::vector<float>(x.size(), 3.0f), s);
  ops::backout_forward(out_gpu.view(), x_gpu.view(), x_backout_gpu.view(), lambda_gpu.view());
  const std::vector<float> out = out_gpu.values();
  for (size_t i = 0; i < out.size(); ++i) {
    // x - lambda x_backout in fp32 (one FMA or two roundings), then the GPU's rounding to bf16.
    const double terms = std::abs(x[i]) + std::abs(lambda * x_backout[i]);
    ASSERT_NEAR(out[i], out_cpu[i], kBf16Rounding * std::abs(out_cpu[i]) + 4 * kFp32Rounding * terms)
        << "out element " << i;
  }
  // out may alias x: the same bits in place.
  const Bf16OnGpu in_place(x, s);
  ops::backout_forward(in_place.view(), in_place.view(), x_backout_gpu.view(), lambda_gpu.view());
  expect_same_values(in_place.values(), out, "backout_forward in place");

  // The lambda gradient is summed in a fixed order: the same bits on a second run.
  float first_d_lambda = 0;
  for (int run = 0; run < 2; ++run) {
    const Bf16OnGpu d_x_backout_gpu(std::vector<float>(x.size(), 3.0f), s);
    const ScalarOnGpu d_lambda_gpu(d_lambda_initial);
    ops::backout_backward(d_x_backout_gpu.view(), d_lambda_gpu.view(), d_out_gpu.view(), x_backout_gpu.view(),
                          lambda_gpu.view());
    // d_x_backout = -lambda d_out: one fp32 product on both sides, then the GPU's rounding.
    expect_cpu_rounded(d_x_backout_gpu.values(), d_x_backout_cpu, "d_x_backout");
    const float d_lambda = d_lambda_gpu.value();
    EXPECT_NEAR(d_lambda, d_lambda_cpu,
                lambda_tolerance(s.channels, sum_of_magnitudes(d_out, x_backout), d_lambda_cpu));
    if (run == 0) first_d_lambda = d_lambda;
    EXPECT_EQ(std::memcmp(&d_lambda, &first_d_lambda, sizeof(float)), 0) << "run " << run;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaElementwise,
                         testing::Values(ActivationShape{7, 77, 0}, ActivationShape{7, 77, 1},
                                         ActivationShape{37, 1280, 0}, ActivationShape{37, 1280, 1},
                                         ActivationShape{4099, 1280, 0}, ActivationShape{4099, 1280, 1}),
                         activation_shape_name);

// The dtype and shape checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaElementwiseContract, RejectsWrongDtypesAndShapes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView bf16(nullptr, {4, 8}, DType::kBF16, Device::kCuda);
  const TensorView f32(nullptr, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView other_shape(nullptr, {4, 9}, DType::kBF16, Device::kCuda);
  const TensorView lambda(nullptr, {1}, DType::kF32, Device::kCuda);
  const TensorView lambda_bf16(nullptr, {1}, DType::kBF16, Device::kCuda);
  const TensorView two_lambdas(nullptr, {2}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::relu_squared_forward(f32, f32, ops::AmaxOutput()),
               "relu_squared_forward on CUDA: out must be bf16");
  EXPECT_DEATH(ops::relu_squared_backward(bf16, bf16, other_shape), "relu_squared_backward");
  EXPECT_DEATH(ops::backout_forward(bf16, bf16, bf16, lambda_bf16),
               "backout_forward on CUDA: lambda must be f32");
  EXPECT_DEATH(ops::backout_backward(bf16, two_lambdas, bf16, bf16, lambda),
               "backout_backward on CUDA: d_lambda must have one element");
  EXPECT_DEATH(ops::backout_forward(bf16, bf16, other_shape, lambda), "backout_forward");
  EXPECT_DEATH(ops::backout_backward(f32, lambda, bf16, bf16, lambda),
               "backout_backward on CUDA: d_x_backout must be bf16");
}

}  // namespace
}  // namespace nanoforge::gpu_test
