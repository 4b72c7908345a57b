// CUDA softcap cross-entropy (raw bf16 logits capped on the fly and left unchanged, fp32 losses and lse, i32
// targets with -1 ignored), its forward-backward (the gradient written over the logits) and sum_loss. Both
// are checked against the CPU ops run in f64 on the same bf16-valued logits: the V-term sums are long, and
// the f64 reference leaves the tolerance to the GPU's own fp32 error, with fast tanh and exp (the bounds are
// derived in kernels/cuda/softcap_cross_entropy.cu). Shapes: 64 rows of a 32768
// vocabulary (nanochat's); 65544 columns (past 2^16); 1000 (whole 16-byte packs, fewer than one per thread);
// 77 (odd: the unpacked kernels); targets include -1, the first and last column, and a case where every
// target is ignored.
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

constexpr double kSoftcap = 15.0;  // nanochat's logit softcap
constexpr int32_t kIgnore = -1;
constexpr int kThreadsPerRow = 512;  // the forward kernel's block: bounds each thread's share of a row

struct LossCase {
  int64_t rows, vocab;
  bool all_ignored;
};

// Logits with standard deviation 8, so that the softcap's tanh bends many of them; in every fourth row the
// last column is 60 (capped near 15), dominating the row's log-sum-exp, so that a kernel that missed the last
// columns could not pass. bf16 values.
struct LossInputs {
  LossCase shape;
  std::vector<float> logits;
  std::vector<int32_t> targets;
};

LossInputs make_inputs(const LossCase& shape, std::mt19937& rng) {
  const auto [N, V, all_ignored] = shape;
  LossInputs in{shape, random_bf16(N * V, 8.0f, rng), std::vector<int32_t>(static_cast<size_t>(N))};
  for (int64_t n = 0; n < N; n += 4)
    in.logits[n * V + V - 1] = 60.0f;
  std::uniform_int_distribution<int32_t> column(0, static_cast<int32_t>(V - 1));
  for (int64_t n = 0; n < N; ++n) {
    switch (n % 5) {
      case 0:
        in.targets[n] = static_cast<int32_t>(V - 1);
        break;
      case 1:
        in.targets[n] = 0;
        break;
      case 2:
        in.targets[n] = kIgnore;
        break;
      default:
        in.targets[n] = column(rng);
    }
    if (all_ignored) in.targets[n] = kIgnore;
  }
  return in;
}

struct ForwardResult {
  std::vector<float> logits_after, losses, lse;  // logits_after: the logits buffer once the forward ran
};

ForwardResult cuda_forward(const LossInputs& in) {
  const auto [N, V, all_ignored] = in.shape;
  const DeviceBuffer logits = upload(to_bf16_bits(in.logits));
  const DeviceBuffer targets = upload(in.targets);
  const DeviceBuffer losses(Device::kCuda, N * dtype_bytes(DType::kF32));
  const DeviceBuffer lse(Device::kCuda, N * dtype_bytes(DType::kF32));
  ops::softcap_cross_entropy_forward(cuda_view(losses, {N}, DType::kF32), cuda_view(lse, {N}, DType::kF32),
                                     cuda_view(logits, {N, V}, DType::kBF16),
                                     cuda_view(targets, {N}, DType::kI32), kSoftcap);
  return {from_bf16_bits(download<uint16_t>(logits)), download<float>(losses), download<float>(lse)};
}

// The GPU's error bounds (the kernel's header derives them from the hardware's __expf and __fdividef; on the
// emulator both are exact, and these bounds hold all the more).
// z = 15 tanh(x / 15) with tanh = 1 - 2 / (exp(2x / 15) + 1): within (60 + 1.2 |x|) 2^-24 absolute, plus the
// products x / 15 and 15 (...) (at most 20 2^-24 absolute).
double z_error(double x) {
  return (80 + 1.2 * std::abs(x)) * kFp32Rounding;
}
constexpr double kLargestLogit = 60;  // make_inputs' largest |logit| (its normal values are under 60 too)

// lse = max + log(sum of exp(z - max)), all in fp32; the sum's relative error is lse's absolute error. Each
// term's relative error is z's absolute error plus __expf's 2 + 1.173 |z - max| <= 37 ulps (|z - max| <= 30).
// A thread adds its V / 512 terms one at a time: one rounding each, or at most 4 more when a term raises the
// running max (a rescaling exponential of up to 37 ulps, a multiply, an add); the 9 combining levels of the
// block (5 shuffle, 4 across warps) cost at most 40 ulps each. logf and the final add are a few ulps of |lse|
// (<= 15 + log V).
double lse_error(int64_t vocab) {
  const double per_thread = std::ceil(static_cast<double>(vocab) / kThreadsPerRow);
  return z_error(kLargestLogit) + (37 + 4 * per_thread + 40 * 9 + 8) * kFp32Rounding +
         4 * kFp32Rounding * (kSoftcap + std::log(static_cast<double>(vocab)));
}

class CudaSoftcapCrossEntropy : public testing::TestWithParam<LossCase> {};

TEST_P(CudaSoftcapCrossEntropy, ForwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(41);
  LossInputs in = make_inputs(GetParam(), rng);
  const auto [N, V, all_ignored] = in.shape;
  std::vector<double> z(in.logits.begin(), in.logits.end()), losses(static_cast<size_t>(N)), lse(losses);
  ops::softcap_cross_entropy_forward(cpu_view(losses, {N}), cpu_view(lse, {N}), cpu_view(z, {N, V}),
                                     cpu_view(in.targets, {N}), kSoftcap);
  const ForwardResult gpu = cuda_forward(in);
  ASSERT_EQ(gpu.logits_after, in.logits) << "the forward must leave the logits as they were";

  const double lse_tolerance = lse_error(V);
  for (int64_t n = 0; n < N; ++n) {
    ASSERT_NEAR(gpu.lse[n], lse[n], lse_tolerance) << "row " << n;
    if (in.targets[n] == kIgnore) {
      ASSERT_EQ(gpu.losses[n], 0.0f) << "row " << n;
    } else {
      // loss = lse - z[target]: both differences, and the subtraction's rounding.
      ASSERT_NEAR(gpu.losses[n], losses[n],
                  lse_tolerance + z_error(kLargestLogit) + 2 * kFp32Rounding * std::abs(losses[n]))
          << "row " << n;
    }
  }
}

// The forward reduces each row in a fixed order, so a second run over the same logits gives the same bits.
TEST_P(CudaSoftcapCrossEntropy, ForwardRepeatsBitwise) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(42);
  const LossInputs in = make_inputs(GetParam(), rng);
  const ForwardResult first = cuda_forward(in);
  const ForwardResult second = cuda_forward(in);
  EXPECT_EQ(first.logits_after, second.logits_after);
  EXPECT_EQ(first.losses, second.losses);
  EXPECT_EQ(first.lse, second.lse);
}

TEST_P(CudaSoftcapCrossEntropy, SumLossMatchesCpuAndRepeatsBitwise) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  LossInputs in = make_inputs(GetParam(), rng);
  const auto [N, V, all_ignored] = in.shape;
  std::vector<float> losses = cuda_forward(in).losses;
  // Losses on ignored rows are 0 by contract; make them nonzero here so that summing them would show.
  for (int64_t n = 0; n < N; ++n) {
    if (in.targets[n] == kIgnore) losses[n] = 1000.0f;
  }
  const ops::LossSum cpu = ops::sum_loss(cpu_view(losses, {N}), cpu_view(in.targets, {N}));
  const DeviceBuffer losses_gpu = upload(losses);
  const DeviceBuffer targets_gpu = upload(in.targets);
  const TensorView losses_view = cuda_view(losses_gpu, {N}, DType::kF32);
  const TensorView targets_view = cuda_view(targets_gpu, {N}, DType::kI32);
  const ops::LossSum gpu = ops::sum_loss(losses_view, targets_view);
  EXPECT_EQ(gpu.count, cpu.count);
  if (all_ignored) {
    EXPECT_EQ(gpu.count, 0);
    EXPECT_EQ(gpu.sum, 0.0);
  }
  // Both sides add the same fp32 values in fp64 in different orders: within N * 2^-53 of the exact sum
  // relative to the sum of the (positive) losses.
  EXPECT_NEAR(gpu.sum, cpu.sum, static_cast<double>(N) * std::ldexp(1.0, -53) * std::abs(cpu.sum) * 2);
  const ops::LossSum again = ops::sum_loss(losses_view, targets_view);
  EXPECT_EQ(again.sum, gpu.sum);
  EXPECT_EQ(again.count, gpu.count);
}

// The forward-backward against the CPU op in f64 on the same bf16-valued logits: its losses and lse are the
// GPU forward's bits (the same row code), and its gradient is within the bounds below of the exact one.
TEST_P(CudaSoftcapCrossEntropy, ForwardBackwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(44);
  const LossInputs in = make_inputs(GetParam(), rng);
  const auto [N, V, all_ignored] = in.shape;
  const double loss_scale = 0.5;  // as a micro-batch of two contributes
  std::vector<int32_t> targets = in.targets;
  std::vector<double> d_cpu(in.logits.begin(), in.logits.end()), cpu_losses(static_cast<size_t>(N)),
      cpu_lse(cpu_losses);
  ops::softcap_cross_entropy_forward_backward(cpu_view(cpu_losses, {N}), cpu_view(cpu_lse, {N}),
                                              cpu_view(d_cpu, {N, V}), cpu_view(targets, {N}), kSoftcap,
                                              loss_scale);

  const DeviceBuffer logits_gpu = upload(to_bf16_bits(in.logits));
  const DeviceBuffer targets_gpu = upload(targets);
  const DeviceBuffer losses_gpu(Device::kCuda, N * dtype_bytes(DType::kF32));
  const DeviceBuffer lse_gpu(Device::kCuda, N * dtype_bytes(DType::kF32));
  ops::softcap_cross_entropy_forward_backward(cuda_view(losses_gpu, {N}, DType::kF32),
                                              cuda_view(lse_gpu, {N}, DType::kF32),
                                              cuda_view(logits_gpu, {N, V}, DType::kBF16),
                                              cuda_view(targets_gpu, {N}, DType::kI32), kSoftcap, loss_scale);
  const std::vector<float> d = from_bf16_bits(download<uint16_t>(logits_gpu));
  const ForwardResult forward = cuda_forward(in);
  EXPECT_EQ(download<float>(losses_gpu), forward.losses);
  EXPECT_EQ(download<float>(lse_gpu), forward.lse);

  int64_t valid = 0;
  for (int32_t t : targets)
    valid += t != kIgnore ? 1 : 0;
  const double scale = valid > 0 ? loss_scale / static_cast<double>(valid) : 0.0;
  const double lse_tolerance = lse_error(V);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < V; ++j) {
      const size_t i = static_cast<size_t>(n * V + j);
      if (targets[n] == kIgnore) {
        ASSERT_EQ(d[i], 0.0f) << "row " << n << ", column " << j;
        continue;
      }
      // scale (p - [target]) (1 - q^2) with p = exp(z - lse), q = z / 15: p is off relatively by z's error,
      // lse's and __expf's (2 + 1.173 * 47 ulps, |z - lse| <= 30 + log V < 47) and a product; 1 - q^2 by
      // 2 |q| z_error / 15 and 3 roundings; at the target column p - 1 is taken after both products, a few
      // more ulps of scale (p + 1); then one rounding to bf16.
      const double x = in.logits[i];
      const double z = kSoftcap * std::tanh(x / kSoftcap), q = z / kSoftcap;
      const double p = std::exp(z - cpu_lse[n]);
      const double p_error = p * (z_error(x) + lse_tolerance + 60 * kFp32Rounding);
      const double slope_error = 2 * z_error(x) / kSoftcap + 3 * kFp32Rounding;
      const double tolerance = kBf16Rounding * std::abs(d_cpu[i]) +
                               scale * (p_error * (1 - q * q) + (p + 1) * (slope_error + 8 * kFp32Rounding));
      ASSERT_NEAR(d[i], d_cpu[i], tolerance) << "row " << n << ", column " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaSoftcapCrossEntropy,
                         testing::Values(LossCase{64, 32768, false}, LossCase{6, 65544, false},
                                         LossCase{37, 1000, false}, LossCase{41, 77, false},
                                         LossCase{9, 1000, true}),
                         [](const testing::TestParamInfo<LossCase>& info) {
                           return fmt::format("N{}_V{}{}", info.param.rows, info.param.vocab,
                                              info.param.all_ignored ? "_all_ignored" : "");
                         });

// The dtype and shape checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaSoftcapCrossEntropyContract, RejectsWrongDtypes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  static char memory[64];  // an address for the views; never dereferenced
  const TensorView logits(memory, {2, 8}, DType::kBF16, Device::kCuda);
  const TensorView logits_f32(nullptr, {2, 8}, DType::kF32, Device::kCuda);
  const TensorView per_row(nullptr, {2}, DType::kF32, Device::kCuda);
  const TensorView per_row_bf16(nullptr, {2}, DType::kBF16, Device::kCuda);
  const TensorView targets(nullptr, {2}, DType::kI32, Device::kCuda);
  EXPECT_DEATH(ops::softcap_cross_entropy_forward(per_row, per_row, logits_f32, targets, kSoftcap),
               "softcap_cross_entropy_forward on CUDA: logits must be bf16");
  EXPECT_DEATH(ops::softcap_cross_entropy_forward(per_row, per_row_bf16, logits, targets, kSoftcap),
               "softcap_cross_entropy_forward on CUDA: lse must be f32");
  EXPECT_DEATH(
      ops::softcap_cross_entropy_forward_backward(per_row, per_row, logits_f32, targets, kSoftcap, 1.0),
      "softcap_cross_entropy_forward_backward on CUDA: logits must be bf16");
  EXPECT_DEATH(ops::sum_loss(per_row_bf16, targets), "sum_loss on CUDA: losses must be f32");
}

}  // namespace
}  // namespace nanoforge::gpu_test
