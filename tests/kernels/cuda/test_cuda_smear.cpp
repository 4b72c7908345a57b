// CUDA smear (bf16 x/out/d_x/d_out, fp32 gate sigmoids, gate weight, lambda and their gradients) against the
// CPU op in fp32 on the same bf16-valued inputs: forward, backward (the parameter gradients are added to
// nonzero starting values), and bitwise-equal repeats of the backward's deterministic reductions. Shapes:
// d20's 1280 channels; 72 channels (whole 16-byte packs, fewer than 32 per row); 77 (odd: the unpacked
// kernels); and 8400 rows of 32 channels, more rows than the backward's capped grid covers in one pass.
// Inputs are bf16 on both sides, so the outputs' rounding to bf16 is their only bf16 error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

constexpr int64_t kGateChannels = 24;  // nanochat's smear gate reads x[..., :24]
constexpr float kLambda = 0.7f;        // nanochat starts it at 0; any nonzero value exercises every term

struct SmearCase {
  int64_t batch, seq, channels;
};

// The inputs of one case: x and d_out (bf16 values), the gate weight (uniform in [-0.3, 0.3], so that the
// gate's pre-activation spreads over the sigmoid) and lambda.
struct SmearInputs {
  SmearCase shape;
  std::vector<float> x, d_out, gate_weight, lambda;
  int64_t rows() const { return shape.batch * shape.seq; }
};

SmearInputs make_inputs(const SmearCase& shape, std::mt19937& rng) {
  SmearInputs in{shape, {}, {}, {}, {kLambda}};
  const int64_t numel = shape.batch * shape.seq * shape.channels;
  in.x = random_bf16(numel, 1.0f, rng);
  in.d_out = random_bf16(numel, 1.0f, rng);
  in.gate_weight = uniform_values(kGateChannels, -0.3f, 0.3f, rng);
  return in;
}

struct ForwardResult {
  std::vector<float> out, gate_sigmoid;
};

ForwardResult cuda_forward(const SmearInputs& in) {
  const auto [B, T, C] = in.shape;
  const DeviceBuffer x = upload(to_bf16_bits(in.x));
  const DeviceBuffer out(Device::kCuda, B * T * C * dtype_bytes(DType::kBF16));
  const DeviceBuffer gate_sigmoid(Device::kCuda, B * T * dtype_bytes(DType::kF32));
  const DeviceBuffer gate_weight = upload(in.gate_weight);
  const DeviceBuffer lambda = upload(in.lambda);
  ops::smear_forward(cuda_view(out, {B, T, C}, DType::kBF16), cuda_view(gate_sigmoid, {B, T}, DType::kF32),
                     cuda_view(x, {B, T, C}, DType::kBF16),
                     cuda_view(gate_weight, {1, kGateChannels}, DType::kF32),
                     cuda_view(lambda, {1}, DType::kF32));
  return {from_bf16_bits(download<uint16_t>(out)), download<float>(gate_sigmoid)};
}

// The backward's outputs; d_gate_weight and d_lambda start from the given values (the op adds to them).
struct BackwardResult {
  std::vector<float> d_x, d_gate_weight, d_lambda;
};

BackwardResult cuda_backward(const SmearInputs& in, const std::vector<float>& gate_sigmoid,
                             const BackwardResult& initial) {
  const auto [B, T, C] = in.shape;
  const DeviceBuffer x = upload(to_bf16_bits(in.x));
  const DeviceBuffer d_out = upload(to_bf16_bits(in.d_out));
  const DeviceBuffer d_x = upload(to_bf16_bits(initial.d_x));  // garbage the op must overwrite
  const DeviceBuffer sigmoid = upload(gate_sigmoid);
  const DeviceBuffer gate_weight = upload(in.gate_weight);
  const DeviceBuffer lambda = upload(in.lambda);
  const DeviceBuffer d_gate_weight = upload(initial.d_gate_weight);
  const DeviceBuffer d_lambda = upload(initial.d_lambda);
  ops::smear_backward(
      cuda_view(d_x, {B, T, C}, DType::kBF16), cuda_view(d_gate_weight, {1, kGateChannels}, DType::kF32),
      cuda_view(d_lambda, {1}, DType::kF32), cuda_view(d_out, {B, T, C}, DType::kBF16),
      cuda_view(x, {B, T, C}, DType::kBF16), cuda_view(sigmoid, {B, T}, DType::kF32),
      cuda_view(gate_weight, {1, kGateChannels}, DType::kF32), cuda_view(lambda, {1}, DType::kF32));
  return {from_bf16_bits(download<uint16_t>(d_x)), download<float>(d_gate_weight), download<float>(d_lambda)};
}

BackwardResult initial_gradients(const SmearInputs& in, std::mt19937& rng) {
  return {random_bf16(in.rows() * in.shape.channels, 1.0f, rng),
          uniform_values(kGateChannels, -1.0f, 1.0f, rng), uniform_values(1, -1.0f, 1.0f, rng)};
}

class CudaSmear : public testing::TestWithParam<SmearCase> {};

TEST_P(CudaSmear, ForwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  SmearInputs in = make_inputs(GetParam(), rng);
  const auto [B, T, C] = in.shape;
  std::vector<float> out_cpu(in.x.size()), sigmoid_cpu(static_cast<size_t>(B * T));
  ops::smear_forward(cpu_view(out_cpu, {B, T, C}), cpu_view(sigmoid_cpu, {B, T}), cpu_view(in.x, {B, T, C}),
                     cpu_view(in.gate_weight, {1, kGateChannels}), cpu_view(in.lambda, {1}));
  const ForwardResult gpu = cuda_forward(in);

  for (int64_t row = 0; row < B * T; ++row) {
    const int64_t t = row % T;
    const float* x = &in.x[row * C];
    if (t == 0) {  // nothing to mix in: an exact copy
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(gpu.out[row * C + c], x[c]) << "row " << row << ", channel " << c;
      continue;
    }
    // The gate's pre-activation sums 24 fp32 products in another order on each side: each order is within
    // 23 * 2^-24 of the exact sum, relative to sum |x_j w_j|; the sigmoid's slope is at most 1/4, and expf,
    // the add and the division add a few ulps of the sigmoid (< 1).
    double magnitude = 0;
    for (int64_t j = 0; j < kGateChannels; ++j)
      magnitude += std::abs(static_cast<double>(x[j]) * in.gate_weight[j]);
    const double sigmoid_tolerance = kFp32Rounding * (2.0 * kGateChannels * magnitude / 4 + 8);
    ASSERT_NEAR(gpu.gate_sigmoid[row], sigmoid_cpu[row], sigmoid_tolerance) << "row " << row;
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(row * C + c);
      // out = x + lambda * s * x_prev: the sigmoid's difference times |lambda * x_prev|, three fp32 roundings
      // of the terms on each side, then one rounding to bf16.
      const double mixed = std::abs(kLambda * x[c - C]);
      const double tolerance = kBf16Rounding * std::abs(out_cpu[i]) + mixed * sigmoid_tolerance +
                               6 * kFp32Rounding * (std::abs(x[c]) + mixed);
      ASSERT_NEAR(gpu.out[i], out_cpu[i], tolerance) << "row " << row << ", channel " << c;
    }
  }
}

TEST_P(CudaSmear, BackwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  SmearInputs in = make_inputs(GetParam(), rng);
  const auto [B, T, C] = in.shape;
  // Both sides differentiate at the GPU's gate sigmoids, so this compares the backward pass alone.
  std::vector<float> sigmoid = cuda_forward(in).gate_sigmoid;
  const BackwardResult initial = initial_gradients(in, rng);
  BackwardResult cpu = initial;
  ops::smear_backward(cpu_view(cpu.d_x, {B, T, C}), cpu_view(cpu.d_gate_weight, {1, kGateChannels}),
                      cpu_view(cpu.d_lambda, {1}), cpu_view(in.d_out, {B, T, C}), cpu_view(in.x, {B, T, C}),
                      cpu_view(sigmoid, {B, T}), cpu_view(in.gate_weight, {1, kGateChannels}),
                      cpu_view(in.lambda, {1}));
  const BackwardResult gpu = cuda_backward(in, sigmoid, initial);

  // Per row: the bound on the two sides' difference in d_pre = (d_out[t] . x[t-1]) * lambda * s (1 - s). Each
  // side sums the C-term dot product in its own order, within (C - 1) * 2^-24 of the exact value relative to
  // sum |d_out x_prev|; the three multiplications add a few ulps.
  std::vector<double> d_pre_tolerance(static_cast<size_t>(B * T), 0.0), d_gate_tolerance(d_pre_tolerance);
  std::vector<double> d_pre_magnitude(d_pre_tolerance), d_gate_magnitude(d_pre_tolerance);
  for (int64_t row = 0; row < B * T; ++row) {
    if (row % T == 0) continue;
    double dot = 0, dot_magnitude = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double term = static_cast<double>(in.d_out[row * C + c]) * in.x[(row - 1) * C + c];
      dot += term;
      dot_magnitude += std::abs(term);
    }
    const double s = sigmoid[row], slope = std::abs(kLambda * s * (1 - s));
    d_gate_tolerance[row] = 2.0 * (C + 4) * kFp32Rounding * dot_magnitude;
    d_pre_tolerance[row] = slope * d_gate_tolerance[row] + 8 * kFp32Rounding * slope * std::abs(dot);
    d_pre_magnitude[row] = slope * std::abs(dot);
    d_gate_magnitude[row] = std::abs(dot);
  }

  for (int64_t row = 0; row < B * T; ++row) {
    const bool has_next = row % T + 1 < T;
    const double next_gate = has_next ? std::abs(kLambda * sigmoid[row + 1]) : 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(row * C + c);
      // d_x = d_out + next_gate * d_out_next (+ d_pre * w_c for c < 24): the d_pre difference times |w_c|, a
      // few fp32 roundings of the terms, then one rounding to bf16.
      double terms = std::abs(in.d_out[i]) + (has_next ? next_gate * std::abs(in.d_out[i + C]) : 0.0);
      double tolerance = kBf16Rounding * std::abs(cpu.d_x[i]);
      if (c < kGateChannels) {
        terms += d_pre_magnitude[row] * std::abs(in.gate_weight[c]);
        tolerance += d_pre_tolerance[row] * std::abs(in.gate_weight[c]);
      }
      tolerance += 6 * kFp32Rounding * terms;
      ASSERT_NEAR(gpu.d_x[i], cpu.d_x[i], tolerance) << "row " << row << ", channel " << c;
    }
  }

  // The parameter gradients sum one term per token: the per-row differences above add up; the GPU sums at
  // most rows / 8192 + 1 rows per warp in fp32, then 8 warps per block, then the blocks in fp64 (the CPU in
  // fp64), each order within (terms) * 2^-24 of the exact sum relative to the terms' magnitudes; the starting
  // value and the total are rounded to fp32 once more.
  const double summation_rounding = (static_cast<double>(B * T) / 8192 + 16) * kFp32Rounding;
  for (int64_t j = 0; j < kGateChannels; ++j) {
    double difference = 0, magnitude = 0;
    for (int64_t row = 0; row < B * T; ++row) {
      const double x = std::abs(in.x[row * C + j]);
      difference += d_pre_tolerance[row] * x;
      magnitude += d_pre_magnitude[row] * x;
    }
    const double tolerance =
        difference + summation_rounding * magnitude +
        2 * kFp32Rounding * (std::abs(initial.d_gate_weight[j]) + std::abs(cpu.d_gate_weight[j]));
    EXPECT_NEAR(gpu.d_gate_weight[j], cpu.d_gate_weight[j], tolerance) << "gate weight " << j;
  }
  double difference = 0, magnitude = 0;
  for (int64_t row = 0; row < B * T; ++row) {
    difference += d_gate_tolerance[row] * sigmoid[row];
    magnitude += d_gate_magnitude[row] * sigmoid[row];
  }
  const double lambda_tolerance =
      difference + summation_rounding * magnitude +
      2 * kFp32Rounding * (std::abs(initial.d_lambda[0]) + std::abs(cpu.d_lambda[0]));
  EXPECT_NEAR(gpu.d_lambda[0], cpu.d_lambda[0], lambda_tolerance);
}

// The backward reduces over every token without atomics: two runs give the same bits.
TEST_P(CudaSmear, BackwardRepeatsBitwise) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  const SmearInputs in = make_inputs(GetParam(), rng);
  const std::vector<float> sigmoid = cuda_forward(in).gate_sigmoid;
  const BackwardResult initial = initial_gradients(in, rng);
  const BackwardResult first = cuda_backward(in, sigmoid, initial);
  const BackwardResult second = cuda_backward(in, sigmoid, initial);
  EXPECT_EQ(first.d_x, second.d_x);
  EXPECT_EQ(first.d_gate_weight, second.d_gate_weight);
  EXPECT_EQ(first.d_lambda, second.d_lambda);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaSmear,
                         testing::Values(SmearCase{2, 64, 1280}, SmearCase{3, 37, 72}, SmearCase{2, 19, 77},
                                         SmearCase{4, 2100, 32}),
                         [](const testing::TestParamInfo<SmearCase>& info) {
                           return fmt::format("B{}_T{}_C{}", info.param.batch, info.param.seq,
                                              info.param.channels);
                         });

// The dtype and aliasing checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaSmearContract, RejectsWrongDtypesAndAliasing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int dummy = 0;  // a non-null address for the tensors whose aliasing is checked; never dereferenced
  const TensorView x(&dummy, {2, 8, 32}, DType::kBF16, Device::kCuda);
  const TensorView x_f32(nullptr, {2, 8, 32}, DType::kF32, Device::kCuda);
  const TensorView out(nullptr, {2, 8, 32}, DType::kBF16, Device::kCuda);
  const TensorView gate_sigmoid(nullptr, {2, 8}, DType::kF32, Device::kCuda);
  const TensorView gate_sigmoid_bf16(nullptr, {2, 8}, DType::kBF16, Device::kCuda);
  const TensorView gate_weight(nullptr, {1, kGateChannels}, DType::kF32, Device::kCuda);
  const TensorView lambda(nullptr, {1}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::smear_forward(x_f32, gate_sigmoid, x_f32, gate_weight, lambda),
               "smear_forward on CUDA: out must be bf16");
  EXPECT_DEATH(ops::smear_forward(out, gate_sigmoid_bf16, x, gate_weight, lambda),
               "smear_forward on CUDA: gate_sigmoid must be f32");
  EXPECT_DEATH(ops::smear_forward(x, gate_sigmoid, x, gate_weight, lambda),
               "smear_forward on CUDA: out must not alias x");
  EXPECT_DEATH(ops::smear_backward(x, gate_weight, lambda, x, out, gate_sigmoid, gate_weight, lambda),
               "smear_backward on CUDA: d_x must not alias d_out");
}

}  // namespace
}  // namespace nanoforge::gpu_test
