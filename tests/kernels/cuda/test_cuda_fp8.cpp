// The CUDA FP8 ops against the CPU ops: fp8_quantize's codes and inverse scale bit for bit (bf16 and f32
// inputs, a block of columns, both layouts, a ragged tile edge), fp8_matmul within fp32 accumulation order
// and one output rounding, copy_columns exactly; the amax fused into RMSNorm, the residual-mix norm and ReLU²
// equal to the max of what they wrote; and a GEMM that FP8 tensor cores cannot run (K not a
// multiple of 16) refused as it would be on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/fp8_format.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

class CudaFp8 : public ::testing::Test {
 protected:
  void SetUp() override { NANOFORGE_SKIP_WITHOUT_GPU(); }
};

// fp8_quantize on the GPU of x (rows, cols) in `dtype`, columns [first, first + width); returns (q, q_t,
// inv_scale) read back.
struct Quantized {
  std::vector<uint8_t> q, q_t;
  float inv_scale = 0, amax = 0;
};

Quantized quantize_on_gpu(const std::vector<float>& x, int64_t rows, int64_t cols, DType dtype, int64_t first,
                          int64_t width, DType format) {
  const GpuTensor input(x, {rows, cols}, dtype, 0);
  DeviceBuffer q(Device::kCuda, rows * width), q_t(Device::kCuda, rows * width), scale(Device::kCuda, 4),
      amax(Device::kCuda, 4);
  ops::fp8_quantize(cuda_view(q, {rows, width}, format), cuda_view(q_t, {width, rows}, format),
                    cuda_view(scale, {1}, DType::kF32), cuda_view(amax, {1}, DType::kF32),
                    ops::Fp8Amax::kCompute, input.view, first);
  Quantized out;
  out.q = download<uint8_t>(q);
  out.q_t = download<uint8_t>(q_t);
  out.inv_scale = download<float>(scale)[0];
  out.amax = download<float>(amax)[0];
  return out;
}

Quantized quantize_on_cpu(std::vector<float> x, int64_t rows, int64_t cols, int64_t first, int64_t width,
                          DType format) {
  Quantized out;
  out.q.resize(rows * width);
  out.q_t.resize(rows * width);
  ops::fp8_quantize(TensorView(out.q.data(), {rows, width}, format, Device::kCpu),
                    TensorView(out.q_t.data(), {width, rows}, format, Device::kCpu),
                    TensorView(&out.inv_scale, {1}, DType::kF32, Device::kCpu),
                    TensorView(&out.amax, {1}, DType::kF32, Device::kCpu), ops::Fp8Amax::kCompute,
                    cpu_view(x, {rows, cols}), first);
  return out;
}

TEST_F(CudaFp8, QuantizeGivesTheCpuCodesBitForBit) {
  std::mt19937 rng(11);
  // 70 x 100: tiles that end mid-way in both directions; block [20, 20 + 48) of the columns.
  const int64_t rows = 70, cols = 100, first = 20, width = 48;
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    for (const DType format : {DType::kF8E4M3, DType::kF8E5M2}) {
      std::vector<float> x = normal_values(rows * cols, 3.0f, rng);
      if (dtype == DType::kBF16) x = rounded_to_bf16(x);  // the CPU sees the values the GPU holds
      const Quantized gpu = quantize_on_gpu(x, rows, cols, dtype, first, width, format);
      const Quantized cpu = quantize_on_cpu(x, rows, cols, first, width, format);
      EXPECT_EQ(gpu.amax, cpu.amax) << dtype_name(dtype) << " " << dtype_name(format);
      EXPECT_EQ(gpu.inv_scale, cpu.inv_scale) << dtype_name(dtype) << " " << dtype_name(format);
      EXPECT_EQ(gpu.q, cpu.q) << dtype_name(dtype) << " " << dtype_name(format);
      EXPECT_EQ(gpu.q_t, cpu.q_t) << dtype_name(dtype) << " " << dtype_name(format);
    }
  }
}

// The amax fused into the ops that produce an FP8 GEMM's input is max |out| of what they wrote, bit for
// bit (a NaN row makes it NaN), and quantising with it given gives the codes of quantising on its own.
TEST_F(CudaFp8, FusedAmaxIsTheMaxOfWhatTheProducerWrote) {
  std::mt19937 rng(14);
  const int64_t rows = 37, width = 256;  // rows that end mid-block (8 rows per block)
  const std::vector<float> x = random_bf16(rows * width, 3.0f, rng),
                           x0 = random_bf16(rows * width, 1.0f, rng);
  const DeviceBuffer amax(Device::kCuda, 4), rstd(Device::kCuda, rows * 4);
  const DeviceBuffer lambdas = upload(std::vector<float>{0.8f, -0.3f});
  const ops::AmaxOutput amax_out{cuda_view(amax, {1}, DType::kF32)};
  auto max_abs = [](const std::vector<float>& values) {
    float m = 0;
    for (float v : values)
      m = std::isnan(v) || std::isnan(m) ? std::numeric_limits<float>::quiet_NaN()
                                         : std::max(m, std::fabs(v));
    return m;
  };
  const GpuTensor in(x, {rows, width}, DType::kBF16, 0), in0(x0, {rows, width}, DType::kBF16, 0);
  const GpuTensor out(std::vector<float>(rows * width, 0.0f), {rows, width}, DType::kBF16, 0);
  const GpuTensor residual(std::vector<float>(rows * width, 0.0f), {rows, width}, DType::kBF16, 0);

  ops::rmsnorm_forward(out.view, cuda_view(rstd, {rows}, DType::kF32), in.view, 1.0, amax_out);
  EXPECT_EQ(download<float>(amax)[0], max_abs(out.values()));
  ops::residual_mix_rmsnorm_forward(residual.view, out.view, cuda_view(rstd, {rows}, DType::kF32), in.view,
                                    in0.view, view_of(lambdas, DType::kF32, 0, 1),
                                    view_of(lambdas, DType::kF32, 1, 1), amax_out);
  const std::vector<float> normed = out.values();
  EXPECT_EQ(download<float>(amax)[0], max_abs(normed));
  // Quantising that output with its fused amax given: the codes of the quantiser's own amax pass.
  DeviceBuffer q(Device::kCuda, rows * width), scale(Device::kCuda, 4);
  ops::fp8_quantize(cuda_view(q, {rows, width}, DType::kF8E4M3), TensorView(),
                    cuda_view(scale, {1}, DType::kF32), cuda_view(amax, {1}, DType::kF32),
                    ops::Fp8Amax::kGiven, out.view, 0);
  const Quantized own = quantize_on_gpu(normed, rows, width, DType::kBF16, 0, width, DType::kF8E4M3);
  EXPECT_EQ(download<uint8_t>(q), own.q);
  EXPECT_EQ(download<float>(scale)[0], own.inv_scale);

  ops::relu_squared_forward(out.view, in.view, amax_out);
  EXPECT_EQ(download<float>(amax)[0], max_abs(out.values()));
  EXPECT_GT(download<float>(amax)[0], 0.0f);

  std::vector<float> with_nan = x;
  with_nan[5 * width + 3] = std::numeric_limits<float>::quiet_NaN();
  const GpuTensor nan_in(with_nan, {rows, width}, DType::kBF16, 0);
  ops::rmsnorm_forward(out.view, cuda_view(rstd, {rows}, DType::kF32), nan_in.view, 1.0, amax_out);
  EXPECT_TRUE(std::isnan(download<float>(amax)[0]));
}

TEST_F(CudaFp8, MatmulMatchesTheCpuOpIntoABlockOfColumns) {
  std::mt19937 rng(12);
  const int64_t m = 32, n = 48, k = 64, out_cols = 80, first = 16;
  std::vector<float> a_values = normal_values(m * k, 1.0f, rng), b_values = normal_values(n * k, 1.0f, rng);
  const Quantized a = quantize_on_cpu(a_values, m, k, 0, k, DType::kF8E4M3);
  const Quantized b = quantize_on_cpu(b_values, n, k, 0, k, DType::kF8E5M2);
  std::vector<float> before = rounded_to_bf16(normal_values(m * out_cols, 1.0f, rng));
  // CPU: f32 out; GPU: bf16 out (one rounding more).
  std::vector<float> expected = before;
  float a_inv = a.inv_scale, b_inv = b.inv_scale;
  std::vector<uint8_t> a_codes = a.q, b_codes = b.q;
  ops::fp8_matmul(cpu_view(expected, {m, out_cols}), first,
                  TensorView(a_codes.data(), {m, k}, DType::kF8E4M3, Device::kCpu),
                  TensorView(&a_inv, {1}, DType::kF32, Device::kCpu),
                  TensorView(b_codes.data(), {n, k}, DType::kF8E5M2, Device::kCpu),
                  TensorView(&b_inv, {1}, DType::kF32, Device::kCpu), 1.0);
  const GpuTensor out(before, {m, out_cols}, DType::kBF16, 0);
  const DeviceBuffer a_gpu = upload(a.q), b_gpu = upload(b.q);
  const DeviceBuffer a_scale = upload(std::vector<float>{a_inv}), b_scale = upload(std::vector<float>{b_inv});
  ops::fp8_matmul(out.view, first, cuda_view(a_gpu, {m, k}, DType::kF8E4M3),
                  cuda_view(a_scale, {1}, DType::kF32), cuda_view(b_gpu, {n, k}, DType::kF8E5M2),
                  cuda_view(b_scale, {1}, DType::kF32), 1.0);
  const std::vector<float> got = out.values();
  for (int64_t i = 0; i < m * out_cols; ++i) {
    const int64_t column = i % out_cols;
    if (column < first || column >= first + n) {
      EXPECT_EQ(got[i], before[i]) << i;  // outside the block
    } else {
      // One bf16 rounding of the result, plus fp32 accumulation-order noise far below it.
      EXPECT_NEAR(got[i], expected[i], kBf16Rounding * std::fabs(expected[i]) + 1e-6) << i;
    }
  }
}

TEST_F(CudaFp8, CopyColumnsMovesItsBlock) {
  std::mt19937 rng(13);
  const std::vector<float> src = rounded_to_bf16(normal_values(5 * 12, 1.0f, rng));
  const std::vector<float> dst_before(5 * 7, 2.0f);
  const GpuTensor from(src, {5, 12}, DType::kBF16, 0), to(dst_before, {5, 7}, DType::kBF16, 0);
  ops::copy_columns(to.view, 3, from.view, 6, 4);
  const std::vector<float> got = to.values();
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 7; ++c)
      EXPECT_EQ(got[r * 7 + c], c >= 3 ? src[r * 12 + 6 + c - 3] : 2.0f);
}

TEST_F(CudaFp8, AGemmFp8TensorCoresCannotRunIsRefused) {
  // K = 24 is no multiple of 16: cuBLASLt has no FP8 kernel for it, on a GPU and on the emulator.
  const int64_t m = 16, n = 16, k = 24;
  const DeviceBuffer a(Device::kCuda, m * k), b(Device::kCuda, n * k), out(Device::kCuda, m * n * 4);
  const DeviceBuffer scale = upload(std::vector<float>{1.0f});
  EXPECT_DEATH(ops::fp8_matmul(cuda_view(out, {m, n}, DType::kF32), 0, cuda_view(a, {m, k}, DType::kF8E4M3),
                               cuda_view(scale, {1}, DType::kF32), cuda_view(b, {n, k}, DType::kF8E4M3),
                               cuda_view(scale, {1}, DType::kF32), 0.0),
               "no algorithm");
}

}  // namespace
}  // namespace nanoforge::gpu_test
