// CUDA residual mix with its RMSNorm in one pass (bf16 activations, f32 rstd, 1-element f32 lambdas on the
// device) against the CPU op in fp32 on the same bf16-valued inputs, forward and backward, with bounds
// argued per element. Sizes: 7 x 77 (no 16-byte packs), 37 x 1280 (d20's width: whole packs) at the start
// of its buffers and one element in (no packs), and 8201 x 16 (more rows than the backward's capped grid
// holds warps, so its row loop strides); elements around every written view are checked untouched, and the
// lambda gradients are the same bits on a second run.
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

class CudaResidualMixRmsNorm : public testing::TestWithParam<ActivationShape> {
 protected:
  const ActivationShape& shape() const { return GetParam(); }
  TensorView cpu(std::vector<float>& values) const {
    return cpu_view(values, {shape().rows, shape().channels});
  }
  TensorView gpu(const PaddedOnGpu<uint16_t>& padded) const {
    return padded.view({shape().rows, shape().channels});
  }
  PaddedOnGpu<uint16_t> on_gpu(const std::vector<float>& values) const {
    return PaddedOnGpu<uint16_t>(to_bf16_bits(values), shape().offset, DType::kBF16);
  }
  // A row's sum of `channels` fp32 terms in any order lies within (channels - 1) 2^-24 of the exact sum,
  // relative to the sum of the terms' magnitudes; a few more roundings follow on each side.
  double sum_bound() const { return static_cast<double>(shape().channels + 8) * kFp32Rounding; }

  // The GPU's forward (residual, out, rstd) against the CPU op: residual against the op's on x and x0 (a, b),
  // out and rstd against the op run on the GPU's residual (x = residual, x0 = 0), so each comparison sees
  // one step.
  void expect_forward_matches_cpu(const std::vector<float>& x, const std::vector<float>& x0, float a, float b,
                                  const std::vector<float>& residual_cpu, std::vector<float>& residual,
                                  const std::vector<float>& out, const std::vector<float>& rstd) const;

  // What the backward's comparisons need of the CPU's g = d_residual + n, the norm's gradient added to the
  // residual's, per element (its bound on the two sides' difference, its magnitude) and summed against x and
  // x0 for the lambda gradients.
  struct GradientBounds {
    std::vector<double> g_error, g_magnitude;
    double x_terms = 0, x0_terms = 0, x_error = 0, x0_error = 0;
  };
  GradientBounds gradient_bounds(const std::vector<float>& x, const std::vector<float>& x0,
                                 const std::vector<float>& d_residual, const std::vector<float>& d_out,
                                 const std::vector<float>& out, const std::vector<float>& rstd) const;
};

void CudaResidualMixRmsNorm::expect_forward_matches_cpu(const std::vector<float>& x,
                                                        const std::vector<float>& x0, float a, float b,
                                                        const std::vector<float>& residual_cpu,
                                                        std::vector<float>& residual,
                                                        const std::vector<float>& out,
                                                        const std::vector<float>& rstd) const {
  const ActivationShape& s = shape();
  const int64_t numel = s.numel();
  for (int64_t i = 0; i < numel; ++i) {
    // a x + b x0 in fp32 (either side may fuse one product into an FMA: at most 2 roundings of 2^-24 of the
    // terms apart), then the GPU's rounding to bf16.
    const double terms = std::abs(a * x[i]) + std::abs(b * x0[i]);
    ASSERT_NEAR(residual[i], residual_cpu[i],
                kBf16Rounding * std::abs(residual_cpu[i]) + 4 * kFp32Rounding * terms)
        << "residual element " << i;
  }
  std::vector<float> zeros(numel, 0.0f), one{1.0f}, zero{0.0f}, mixed_unused(numel), out_cpu(numel),
      rstd_cpu(s.rows);
  ops::residual_mix_rmsnorm_forward(cpu(mixed_unused), cpu(out_cpu), cpu_view(rstd_cpu, {s.rows}),
                                    cpu(residual), cpu(zeros), cpu_view(one, {1}), cpu_view(zero, {1}),
                                    ops::AmaxOutput());
  for (int64_t r = 0; r < s.rows; ++r) {
    // Sums of squares (positive terms) within sum_bound() relatively: rstd within half that.
    ASSERT_NEAR(rstd[r], rstd_cpu[r], sum_bound() * rstd_cpu[r]) << "rstd row " << r;
  }
  for (int64_t i = 0; i < numel; ++i) {
    // out = residual rstd: rstd's difference, then the GPU's rounding to bf16.
    ASSERT_NEAR(out[i], out_cpu[i], (kBf16Rounding + 2 * sum_bound()) * std::abs(out_cpu[i]))
        << "out element " << i;
  }
}

CudaResidualMixRmsNorm::GradientBounds CudaResidualMixRmsNorm::gradient_bounds(
    const std::vector<float>& x, const std::vector<float>& x0, const std::vector<float>& d_residual,
    const std::vector<float>& d_out, const std::vector<float>& out, const std::vector<float>& rstd) const {
  const ActivationShape& s = shape();
  const int64_t numel = s.numel();
  GradientBounds bounds;
  std::vector<double>& g_error = bounds.g_error;
  std::vector<double>& g_magnitude = bounds.g_magnitude;
  g_error.resize(numel);
  g_magnitude.resize(numel);
  for (int64_t r = 0; r < s.rows; ++r) {
    double dot = 0, dot_magnitude = 0;
    for (int64_t c = 0; c < s.channels; ++c) {
      const int64_t i = r * s.channels + c;
      dot += static_cast<double>(d_out[i]) * out[i];
      dot_magnitude += std::abs(static_cast<double>(d_out[i]) * out[i]);
    }
    const double projection = std::abs(dot) / s.channels,
                 projection_error = sum_bound() * dot_magnitude / s.channels;
    for (int64_t c = 0; c < s.channels; ++c) {
      const int64_t i = r * s.channels + c;
      const double n = rstd[r] * (std::abs(d_out[i]) + std::abs(out[i]) * projection);
      g_magnitude[i] = std::abs(d_residual[i]) + n;
      const double fp32 = 4 * kFp32Rounding * g_magnitude[i] + rstd[r] * std::abs(out[i]) * projection_error;
      g_error[i] = fp32 + kBf16Rounding * (g_magnitude[i] + fp32);  // the GPU's rounding of g
    }
  }
  for (int64_t i = 0; i < numel; ++i) {
    bounds.x_terms += (g_magnitude[i] + g_error[i]) * std::abs(x[i]);
    bounds.x0_terms += (g_magnitude[i] + g_error[i]) * std::abs(x0[i]);
    bounds.x_error += g_error[i] * std::abs(x[i]);
    bounds.x0_error += g_error[i] * std::abs(x0[i]);
  }
  return bounds;
}

TEST_P(CudaResidualMixRmsNorm, ForwardAndBackwardMatchCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const ActivationShape& s = shape();
  const int64_t numel = s.numel();
  std::mt19937 rng(44);
  const std::vector<float> x = random_bf16(numel, 1.0f, rng), x0 = random_bf16(numel, 1.0f, rng);
  const std::vector<float> d_residual = random_bf16(numel, 1.0f, rng), d_out = random_bf16(numel, 1.0f, rng);
  const std::vector<float> d_x0_initial = random_bf16(numel, 1.0f, rng);
  const float a = 0.9f, b = -0.3f, d_a_initial = 0.5f, d_b_initial = -0.25f;
  std::vector<float> lambdas{a, b};
  const DeviceBuffer lambdas_gpu = upload(lambdas);
  const TensorView a_gpu = view_of(lambdas_gpu, DType::kF32, 0, 1),
                   b_gpu = view_of(lambdas_gpu, DType::kF32, 1, 1);
  std::vector<float> a_cpu{a}, b_cpu{b};

  // Forward. The GPU rounds the mixed residual to bf16 before taking its norm (the residual stream is bf16):
  // the residual is compared with the CPU op's, and out and rstd with the CPU op run on the GPU's residual
  // (x = residual, x0 = 0), so each comparison sees one step.
  std::vector<float> x_values = x, x0_values = x0, residual_cpu(numel), out_unused(numel),
                     rstd_unused(s.rows);
  ops::residual_mix_rmsnorm_forward(cpu(residual_cpu), cpu(out_unused), cpu_view(rstd_unused, {s.rows}),
                                    cpu(x_values), cpu(x0_values), cpu_view(a_cpu, {1}), cpu_view(b_cpu, {1}),
                                    ops::AmaxOutput());
  const PaddedOnGpu<uint16_t> x_gpu = on_gpu(x), x0_gpu = on_gpu(x0);
  const PaddedOnGpu<uint16_t> residual_gpu = on_gpu(std::vector<float>(numel, 3.0f));
  const PaddedOnGpu<uint16_t> out_gpu = on_gpu(std::vector<float>(numel, 3.0f));
  const DeviceBuffer rstd_gpu(Device::kCuda, s.rows * dtype_bytes(DType::kF32));
  const TensorView rstd_view = cuda_view(rstd_gpu, {s.rows}, DType::kF32);
  ops::residual_mix_rmsnorm_forward(gpu(residual_gpu), gpu(out_gpu), rstd_view, gpu(x_gpu), gpu(x0_gpu),
                                    a_gpu, b_gpu, ops::AmaxOutput());
  std::vector<float> residual = from_bf16_bits(residual_gpu.contents());
  const std::vector<float> out = from_bf16_bits(out_gpu.contents());
  std::vector<float> rstd = download<float>(rstd_gpu);
  ASSERT_NO_FATAL_FAILURE(expect_forward_matches_cpu(x, x0, a, b, residual_cpu, residual, out, rstd));

  // Backward, both sides at the GPU's forward results (out, rstd). The norm's gradient n = rstd (d_out - out
  // p), p = mean(d_out out), differs by p's reordering (sum_bound() of sum|d_out out| / C) and a few
  // roundings; the GPU rounds g = d_residual + n to bf16 and derives everything from that g: d_x = a g and
  // d_x0 + b g once more rounded, the lambda sums over g x and g x0.
  std::vector<float> d_x_cpu = d_residual, d_x0_cpu = d_x0_initial, d_a_cpu{d_a_initial},
                     d_b_cpu{d_b_initial};
  std::vector<float> d_out_values = d_out, out_values = out, rstd_values = rstd;
  ops::residual_mix_rmsnorm_backward(cpu(d_x_cpu), cpu(d_x0_cpu), cpu_view(d_a_cpu, {1}),
                                     cpu_view(d_b_cpu, {1}), cpu(d_out_values), cpu(out_values),
                                     cpu_view(rstd_values, {s.rows}), cpu(x_values), cpu(x0_values),
                                     cpu_view(a_cpu, {1}), cpu_view(b_cpu, {1}));
  const GradientBounds bounds = gradient_bounds(x, x0, d_residual, d_out, out, rstd);
  const std::vector<double>& g_error = bounds.g_error;
  const std::vector<double>& g_magnitude = bounds.g_magnitude;
  std::vector<float> first_run;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const PaddedOnGpu<uint16_t> d_residual_gpu = on_gpu(d_residual), d_x0_gpu = on_gpu(d_x0_initial);
    const PaddedOnGpu<uint16_t> d_out_gpu = on_gpu(d_out), out_again = on_gpu(out);
    const DeviceBuffer d_lambdas_gpu = upload(std::vector<float>{d_a_initial, d_b_initial});
    ops::residual_mix_rmsnorm_backward(gpu(d_residual_gpu), gpu(d_x0_gpu),
                                       view_of(d_lambdas_gpu, DType::kF32, 0, 1),
                                       view_of(d_lambdas_gpu, DType::kF32, 1, 1), gpu(d_out_gpu),
                                       gpu(out_again), rstd_view, gpu(x_gpu), gpu(x0_gpu), a_gpu, b_gpu);
    const std::vector<float> d_x = from_bf16_bits(d_residual_gpu.contents());
    const std::vector<float> d_x0 = from_bf16_bits(d_x0_gpu.contents());
    for (int64_t i = 0; i < numel; ++i) {
      // d_x = a g: g's difference times |a|, then a product rounding and the GPU's rounding to bf16.
      const double d_x_bound = std::abs(a) * g_error[i] + (kBf16Rounding + 2 * kFp32Rounding) * std::abs(a) *
                                                              (g_magnitude[i] + g_error[i]);
      ASSERT_NEAR(d_x[i], d_x_cpu[i], d_x_bound) << "d_x element " << i;
      const double d_x0_magnitude = std::abs(d_x0_initial[i]) + std::abs(b) * (g_magnitude[i] + g_error[i]);
      const double d_x0_bound =
          std::abs(b) * g_error[i] + (kBf16Rounding + 2 * kFp32Rounding) * d_x0_magnitude;
      ASSERT_NEAR(d_x0[i], d_x0_cpu[i], d_x0_bound) << "d_x0 element " << i;
    }
    // Each lambda gradient: initial + sum over all elements of g times an input. g's differences add up to
    // x_error; the sums' orders differ: on the CPU one row's dot product (C terms, rows added in double),
    // on the GPU one thread's rows (at most ceil(rows / 8192) of them, C / 32 terms each) and the block's
    // tree (8 levels; partials added in double): (C + 256) 2^-24 of the terms covers both; then one f32
    // rounding of the total on each side.
    const std::vector<float> d_lambdas = download<float>(d_lambdas_gpu);
    const double order = static_cast<double>(s.channels + 256) * kFp32Rounding;
    EXPECT_NEAR(d_lambdas[0], d_a_cpu[0],
                bounds.x_error + order * bounds.x_terms + 4 * kFp32Rounding * std::abs(d_a_cpu[0]));
    EXPECT_NEAR(d_lambdas[1], d_b_cpu[0],
                bounds.x0_error + order * bounds.x0_terms + 4 * kFp32Rounding * std::abs(d_b_cpu[0]));
    if (run == 0) first_run = d_lambdas;
    EXPECT_EQ(std::memcmp(d_lambdas.data(), first_run.data(), 2 * sizeof(float)), 0)
        << "lambda gradient bits";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaResidualMixRmsNorm,
                         testing::Values(ActivationShape{7, 77, 0}, ActivationShape{37, 1280, 0},
                                         ActivationShape{37, 1280, 1}, ActivationShape{8201, 16, 0}),
                         activation_shape_name);

// The dtype and shape checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaResidualMixRmsNormContract, RejectsWrongDtypesAndShapes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView bf16(nullptr, {4, 8}, DType::kBF16, Device::kCuda);
  const TensorView f32(nullptr, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView other_shape(nullptr, {4, 9}, DType::kBF16, Device::kCuda);
  const TensorView rstd(nullptr, {4}, DType::kF32, Device::kCuda);
  const TensorView short_rstd(nullptr, {3}, DType::kF32, Device::kCuda);
  const TensorView lambda(nullptr, {1}, DType::kF32, Device::kCuda);
  const TensorView lambda_bf16(nullptr, {1}, DType::kBF16, Device::kCuda);
  const TensorView two_lambdas(nullptr, {2}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(
      ops::residual_mix_rmsnorm_forward(bf16, bf16, rstd, bf16, bf16, lambda_bf16, lambda, ops::AmaxOutput()),
      "residual_mix_rmsnorm_forward on CUDA: resid_lambda must be f32");
  EXPECT_DEATH(
      ops::residual_mix_rmsnorm_forward(f32, bf16, rstd, bf16, bf16, lambda, lambda, ops::AmaxOutput()),
      "residual_mix_rmsnorm_forward on CUDA: residual must be bf16");
  EXPECT_DEATH(ops::residual_mix_rmsnorm_forward(bf16, bf16, short_rstd, bf16, bf16, lambda, lambda,
                                                 ops::AmaxOutput()),
               "must hold one value per row");
  EXPECT_DEATH(ops::residual_mix_rmsnorm_backward(bf16, bf16, two_lambdas, lambda, bf16, bf16, rstd, bf16,
                                                  bf16, lambda, lambda),
               "residual_mix_rmsnorm_backward on CUDA: d_resid_lambda must have one element");
  EXPECT_DEATH(ops::residual_mix_rmsnorm_backward(bf16, bf16, lambda, lambda, bf16, other_shape, rstd, bf16,
                                                  bf16, lambda, lambda),
               "residual_mix_rmsnorm_backward");
}

}  // namespace
}  // namespace nanoforge::gpu_test
