// The MLP's GEMMs with ReLU² in FP8 on the GPU (ops::fp8_linear_relu_squared_forward and
// ops::fp8_relu_squared_linear_backward) against the CPU's FP8 path on the same codes and scales, under both
// MLP GEMM settings: our fused GEMM on FP8 codes (kernels/cuda/mlp_gemm.cu, mma.sync m16n8k32) and cuBLASLt's
// FP8 GEMM followed by the ReLU² pass. 150 x 160 -> 144: rows and columns that end mid-tile, and a K of 160
// codes, two and a half of the kernel's 64-code k tiles. The forward's amax is the max of what it wrote, and
// a K the kernel cannot load is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/fp8_format.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

constexpr int64_t kRows = 150, kDepth = 160, kColumns = 144;
// FP8 x FP8 products are exact in fp32; summing K of them in any order is within K roundings of the sum of
// their magnitudes on each side (2^-23 per addition where tensor cores truncate): K * 2^-22 between the two.
constexpr double kAccumulationRounding = 4 * kFp32Rounding;

// FP8 codes quantised on the CPU (kernels/fp8_format.h's tensorwise scaling), with their inverse scale and
// the values they stand for (code value x inverse scale, exact in fp32).
struct Codes {
  std::vector<uint8_t> codes;
  float inv_scale = 0;
  std::vector<float> values;
};

Codes quantized(std::vector<float> x, int64_t rows, int64_t cols, DType format) {
  Codes out;
  out.codes.resize(static_cast<size_t>(rows * cols));
  float amax = 0;
  ops::fp8_quantize(TensorView(out.codes.data(), {rows, cols}, format, Device::kCpu), TensorView(),
                    TensorView(&out.inv_scale, {1}, DType::kF32, Device::kCpu),
                    TensorView(&amax, {1}, DType::kF32, Device::kCpu), ops::Fp8Amax::kCompute,
                    cpu_view(x, {rows, cols}), 0);
  for (uint8_t code : out.codes)
    out.values.push_back(fp8::decode(code, fp8::format_of(format)) * out.inv_scale);
  return out;
}

// The codes and their inverse scale on the GPU.
struct GpuCodes {
  DeviceBuffer codes, inv_scale;
  TensorView view, scale;
  GpuCodes(const Codes& host, int64_t rows, int64_t cols, DType format)
      : codes(upload(host.codes)), inv_scale(upload(std::vector<float>{host.inv_scale})) {
    view = cuda_view(codes, {rows, cols}, format);
    scale = cuda_view(inv_scale, {1}, DType::kF32);
  }
};

class CudaFp8MlpGemm : public testing::TestWithParam<ops::MlpGemm> {
 protected:
  void SetUp() override { NANOFORGE_SKIP_WITHOUT_GPU(); }
  ops::KernelSettings settings() const { return {.mlp_gemm = GetParam(), .fp8 = true}; }
};

// act = relu(pre)^2 with pre the GEMM's output: the CPU keeps pre in fp32, the GPU rounds it to bf16 (as
// cuBLASLt's bf16 output does). A pre off by at most d gives relu off by d, its square by (2 relu + d) d, and
// act's own bf16 rounding adds 2^-8 of it.
TEST_P(CudaFp8MlpGemm, ForwardIsTheCpuFp8ResultWithinAccumulationAndRounding) {
  std::mt19937 rng(61);
  const Codes x = quantized(normal_values(kRows * kDepth, 1.0f, rng), kRows, kDepth, DType::kF8E4M3);
  const Codes w = quantized(normal_values(kColumns * kDepth, 0.5f, rng), kColumns, kDepth, DType::kF8E4M3);
  std::vector<float> act_cpu(static_cast<size_t>(kRows * kColumns));
  std::vector<uint8_t> x_codes = x.codes, w_codes = w.codes;
  float x_inv = x.inv_scale, w_inv = w.inv_scale, amax_cpu = 0;
  ops::fp8_linear_relu_squared_forward(
      cpu_view(act_cpu, {kRows, kColumns}),
      ops::AmaxOutput{TensorView(&amax_cpu, {1}, DType::kF32, Device::kCpu)},
      TensorView(x_codes.data(), {kRows, kDepth}, DType::kF8E4M3, Device::kCpu),
      TensorView(&x_inv, {1}, DType::kF32, Device::kCpu),
      TensorView(w_codes.data(), {kColumns, kDepth}, DType::kF8E4M3, Device::kCpu),
      TensorView(&w_inv, {1}, DType::kF32, Device::kCpu), settings());

  const GpuCodes x_gpu(x, kRows, kDepth, DType::kF8E4M3), w_gpu(w, kColumns, kDepth, DType::kF8E4M3);
  const GpuTensor act_gpu(std::vector<float>(kRows * kColumns, std::numeric_limits<float>::quiet_NaN()),
                          {kRows, kColumns}, DType::kBF16, 0);
  const DeviceBuffer amax(Device::kCuda, 4);
  ops::fp8_linear_relu_squared_forward(act_gpu.view, ops::AmaxOutput{cuda_view(amax, {1}, DType::kF32)},
                                       x_gpu.view, x_gpu.scale, w_gpu.view, w_gpu.scale, settings());

  const std::vector<float> sums = gemm_magnitudes(x.values, w.values, {kRows, kDepth}, {kColumns, kDepth},
                                                  ops::Transpose::kYes, kRows, kColumns);
  int clipped = 0;
  for (float value : act_cpu)
    clipped += value == 0.0f;
  EXPECT_GT(clipped, 0) << "the inputs should exercise relu's clipping";
  expect_within(
      act_gpu.values(), act_cpu,
      [&](size_t i) {
        const double relu = std::sqrt(static_cast<double>(act_cpu[i]));
        const double d = kDepth * kAccumulationRounding * sums[i] + kBf16Rounding * relu;
        return relu_squared_bound(relu, d);
      },
      "act");
  const std::vector<float> act = act_gpu.values();
  EXPECT_EQ(download<float>(amax)[0], *std::max_element(act.begin(), act.end()));
}

// d_pre = d_act * 2 sqrt(act), d_act the GEMM's output (bf16 on the GPU, fp32 on the CPU), act the same bf16
// values on both sides: d_act's accumulation error and bf16 rounding times 2 sqrt(act), then one more bf16
// rounding.
TEST_P(CudaFp8MlpGemm, BackwardIsTheCpuFp8ResultWithinAccumulationAndRounding) {
  std::mt19937 rng(62);
  const Codes d_y = quantized(normal_values(kRows * kDepth, 1e-3f, rng), kRows, kDepth, DType::kF8E5M2);
  const Codes w = quantized(normal_values(kColumns * kDepth, 0.5f, rng), kColumns, kDepth, DType::kF8E4M3);
  std::vector<float> act = random_bf16(kRows * kColumns, 1.0f, rng);
  for (size_t i = 0; i < act.size(); ++i)
    act[i] = i % 4 == 1 ? 0.0f : round_to_bf16(act[i] * act[i]);  // relu(pre)^2 as the forward stores it
  std::vector<float> d_pre_cpu(static_cast<size_t>(kRows * kColumns));
  std::vector<uint8_t> d_y_codes = d_y.codes, w_codes = w.codes;
  float d_y_inv = d_y.inv_scale, w_inv = w.inv_scale;
  ops::fp8_relu_squared_linear_backward(
      cpu_view(d_pre_cpu, {kRows, kColumns}),
      TensorView(d_y_codes.data(), {kRows, kDepth}, DType::kF8E5M2, Device::kCpu),
      TensorView(&d_y_inv, {1}, DType::kF32, Device::kCpu),
      TensorView(w_codes.data(), {kColumns, kDepth}, DType::kF8E4M3, Device::kCpu),
      TensorView(&w_inv, {1}, DType::kF32, Device::kCpu), cpu_view(act, {kRows, kColumns}), settings());

  const GpuCodes d_y_gpu(d_y, kRows, kDepth, DType::kF8E5M2), w_gpu(w, kColumns, kDepth, DType::kF8E4M3);
  const GpuTensor act_gpu(act, {kRows, kColumns}, DType::kBF16, 0);
  const GpuTensor d_pre_gpu(std::vector<float>(kRows * kColumns, std::numeric_limits<float>::quiet_NaN()),
                            {kRows, kColumns}, DType::kBF16, 0);
  ops::fp8_relu_squared_linear_backward(d_pre_gpu.view, d_y_gpu.view, d_y_gpu.scale, w_gpu.view, w_gpu.scale,
                                        act_gpu.view, settings());

  const std::vector<float> sums = gemm_magnitudes(d_y.values, w.values, {kRows, kDepth}, {kColumns, kDepth},
                                                  ops::Transpose::kYes, kRows, kColumns);
  expect_within(
      d_pre_gpu.values(), d_pre_cpu,
      [&](size_t i) {
        const double factor = 2 * std::sqrt(static_cast<double>(act[i]));
        const double d_act = factor > 0 ? std::abs(d_pre_cpu[i]) / factor : 0.0;
        const double product = (kDepth * kAccumulationRounding * sums[i] + kBf16Rounding * d_act) * factor;
        return product + kBf16Rounding * (std::abs(d_pre_cpu[i]) + product) +
               4 * kFp32Rounding * sums[i] * factor;
      },
      "d_pre");
}

INSTANTIATE_TEST_SUITE_P(MlpGemms, CudaFp8MlpGemm,
                         testing::Values(ops::MlpGemm::kFused, ops::MlpGemm::kCublasLt),
                         [](const testing::TestParamInfo<ops::MlpGemm>& info) {
                           return std::string(ops::mlp_gemm_name(info.param));
                         });

// The checks run on the host before any CUDA call, so this needs no GPU (and runs in CI); the views'
// addresses are never dereferenced.
TEST(CudaFp8MlpGemmContracts, CodesTheKernelCannotLoadAreRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const ops::KernelSettings fused{.mlp_gemm = ops::MlpGemm::kFused, .fp8 = true};
  uintptr_t next_address = 1 << 20;
  const auto view = [&](std::initializer_list<int64_t> shape, DType dtype) {
    next_address += 1 << 20;
    return TensorView(reinterpret_cast<void*>(next_address), shape, dtype, Device::kCuda);
  };
  const TensorView scale = view({1}, DType::kF32);
  // K = 24 codes: no whole 16-byte chunks.
  EXPECT_DEATH(ops::fp8_linear_relu_squared_forward(view({4, 16}, DType::kBF16), ops::AmaxOutput(),
                                                    view({4, 24}, DType::kF8E4M3), scale,
                                                    view({16, 24}, DType::kF8E4M3), scale, fused),
               "fp8_linear_relu_squared_forward on CUDA: the MLP GEMM loads 16-byte chunks; K = 24 must be a "
               "multiple of 16");
  // The output gradient in e4m3: the backward's A is e5m2.
  EXPECT_DEATH(ops::fp8_relu_squared_linear_backward(
                   view({4, 16}, DType::kBF16), view({4, 32}, DType::kF8E4M3), scale,
                   view({16, 32}, DType::kF8E4M3), scale, view({4, 16}, DType::kBF16), fused),
               "d_y must be f8e5m2");
}

}  // namespace
}  // namespace nanoforge::gpu_test
