// CUDA softcap cross-entropy (raw bf16 logits capped on the fly and left unchanged, fp32 losses and lse, i32
// targets with -1 ignored) and sum_loss. The forward is checked against the CPU op run in f64 on the same
// bf16-valued logits: its V-term sums are long, and the f64 reference leaves the tolerance to the GPU's own
// fp32 error. The backward is checked against the CPU op in fp32 on the same logits (capped by the CPU
// forward, as the CPU op expects) and the GPU's lse (elementwise: no long sums). Shapes: 64 rows of a 32768
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
#include "tests/cuda/gpu_test_support.h"

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

  // z = 15 tanh(l / 15) in fp32 (never stored): 1 / 15, the two multiplications and tanhf (2 ulps) put it
  // within 6 ulps of the exact value, at most 6 * 2^-24 * 15 apart in absolute terms.
  const double z_error = 6 * kFp32Rounding * kSoftcap;

  // lse = max + log(sum of exp(z - max)), all in fp32; the sum's relative error is lse's absolute error. Each
  // term's relative error is z's absolute error plus expf's 2 ulps. A thread adds its V / 512 terms one at a
  // time: one rounding each, or at most 4 ulps (expf, a multiply, an add) when a term raises the running max;
  // the 9 combining levels of the block (5 shuffle, 4 across warps) cost at most 4 ulps each. logf and the
  // final add are a few ulps of |lse| (<= 15 + log V).
  const double per_thread = std::ceil(static_cast<double>(V) / kThreadsPerRow);
  const double lse_tolerance =
      z_error + (4 * per_thread + 4 * 9 + 8) * kFp32Rounding + 4 * kFp32Rounding * (kSoftcap + std::log(V));
  for (int64_t n = 0; n < N; ++n) {
    ASSERT_NEAR(gpu.lse[n], lse[n], lse_tolerance) << "row " << n;
    if (in.targets[n] == kIgnore) {
      ASSERT_EQ(gpu.losses[n], 0.0f) << "row " << n;
    } else {
      // loss = lse - z[target]: both differences, and the subtraction's rounding.
      ASSERT_NEAR(gpu.losses[n], losses[n], lse_tolerance + z_error + 2 * kFp32Rounding * std::abs(losses[n]))
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

TEST_P(CudaSoftcapCrossEntropy, BackwardMatchesCpuAndRunsInPlace) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(44);
  const LossInputs in = make_inputs(GetParam(), rng);
  const auto [N, V, all_ignored] = in.shape;
  // Both sides differentiate at the same logits and the GPU's lse: this compares the backward pass alone. The
  // GPU op takes the raw logits and caps them again; the CPU op takes the capped logits its forward leaves in
  // place, so the CPU forward caps a copy first.
  ForwardResult forward = cuda_forward(in);
  std::vector<int32_t> targets = in.targets;
  std::vector<float> logits = in.logits;
  std::vector<float> capped = in.logits, cpu_losses(static_cast<size_t>(N)), cpu_lse(cpu_losses);
  ops::softcap_cross_entropy_forward(cpu_view(cpu_losses, {N}), cpu_view(cpu_lse, {N}),
                                     cpu_view(capped, {N, V}), cpu_view(targets, {N}), kSoftcap);
  const double grad_scale = 1.0 / 37;  // 1 / (valid targets), as GPT::backward passes it
  std::vector<float> d_cpu(logits.size());
  ops::softcap_cross_entropy_backward(cpu_view(d_cpu, {N, V}), cpu_view(capped, {N, V}),
                                      cpu_view(forward.lse, {N}), cpu_view(targets, {N}), kSoftcap,
                                      grad_scale);

  const DeviceBuffer logits_gpu = upload(to_bf16_bits(logits));
  const DeviceBuffer lse_gpu = upload(forward.lse);
  const DeviceBuffer targets_gpu = upload(targets);
  const DeviceBuffer d_gpu(Device::kCuda, N * V * dtype_bytes(DType::kBF16));
  const TensorView logits_view = cuda_view(logits_gpu, {N, V}, DType::kBF16);
  ops::softcap_cross_entropy_backward(cuda_view(d_gpu, {N, V}, DType::kBF16), logits_view,
                                      cuda_view(lse_gpu, {N}, DType::kF32),
                                      cuda_view(targets_gpu, {N}, DType::kI32), kSoftcap, grad_scale);
  const std::vector<float> d = from_bf16_bits(download<uint16_t>(d_gpu));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < V; ++j) {
      const size_t i = static_cast<size_t>(n * V + j);
      if (targets[n] == kIgnore) {
        ASSERT_EQ(d[i], 0.0f) << "row " << n << ", column " << j;
        continue;
      }
      // scale (p - [target]) (1 - q^2): each side recomputes z from the same logit, tanhf against the host's
      // tanh: within 2 z_error of each other (6 ulps of 15 each), which moves p = exp(z - lse) by that much
      // relative and 1 - q^2 by less; expf (2 ulps) against exp (1 ulp) and the few products are a few ulps
      // of scale p; at the target column the subtraction of two such products may cancel, so the bound is a
      // few ulps of scale (p + 1), p <= 1; then one rounding to bf16.
      const double z_error = 6 * kFp32Rounding * kSoftcap;
      ASSERT_NEAR(d[i], d_cpu[i],
                  kBf16Rounding * std::abs(d_cpu[i]) + (16 * kFp32Rounding + 4 * z_error) * grad_scale)
          << "row " << n << ", column " << j;
    }
  }

  // In place (d_logits is the logits): the same bits.
  ops::softcap_cross_entropy_backward(logits_view, logits_view, cuda_view(lse_gpu, {N}, DType::kF32),
                                      cuda_view(targets_gpu, {N}, DType::kI32), kSoftcap, grad_scale);
  EXPECT_EQ(from_bf16_bits(download<uint16_t>(logits_gpu)), d);
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
TEST(CudaSoftcapCrossEntropyContract, RejectsWrongDtypesAndOverlap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  static char memory[64];  // addresses for the overlap check; never dereferenced
  const TensorView logits(memory, {2, 8}, DType::kBF16, Device::kCuda);
  const TensorView shifted_logits(memory + 2, {2, 8}, DType::kBF16, Device::kCuda);
  const TensorView logits_f32(nullptr, {2, 8}, DType::kF32, Device::kCuda);
  const TensorView per_row(nullptr, {2}, DType::kF32, Device::kCuda);
  const TensorView per_row_bf16(nullptr, {2}, DType::kBF16, Device::kCuda);
  const TensorView targets(nullptr, {2}, DType::kI32, Device::kCuda);
  EXPECT_DEATH(ops::softcap_cross_entropy_forward(per_row, per_row, logits_f32, targets, kSoftcap),
               "softcap_cross_entropy_forward on CUDA: logits must be bf16");
  EXPECT_DEATH(ops::softcap_cross_entropy_forward(per_row, per_row_bf16, logits, targets, kSoftcap),
               "softcap_cross_entropy_forward on CUDA: lse must be f32");
  EXPECT_DEATH(ops::softcap_cross_entropy_backward(shifted_logits, logits, per_row, targets, kSoftcap, 1.0),
               "softcap_cross_entropy_backward on CUDA: d_logits .* must be the logits");
  EXPECT_DEATH(ops::sum_loss(per_row_bf16, targets), "sum_loss on CUDA: losses must be f32");
}

}  // namespace
}  // namespace nanoforge::gpu_test
