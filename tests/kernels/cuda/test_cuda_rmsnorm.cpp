// CUDA RMSNorm (bf16 x/out/d_x/d_out, fp32 rstd) against the CPU op in fp32 on the same bf16-valued inputs:
// the forward pass, the backward pass in both Accumulate modes, and in-place use; for scale 1 (norm) and 1.2
// (QK-norm) and widths 128 (a head), 1280 (d20's channels), 72 (whole 16-byte packs, fewer than 32 per row)
// and 77 (odd: the unpacked kernels). Rows mix magnitudes so that eps and all-zero rows are exercised too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

// 37 rows: four full blocks of 8 rows (one warp each) and a partial fifth.
constexpr int64_t kRows = 37;
// Row r is scaled by kRowMagnitudes[r % 4]: ordinary, small enough that eps = 2^-23 changes rstd by 3.6x,
// large, and all zeros (rstd = 1/sqrt(eps), out = 0).
constexpr float kRowMagnitudes[] = {1.0f, 1e-4f, 30.0f, 0.0f};

// (rows, width) standard normal values scaled per row, rounded to bf16 (the values both sides see).
std::vector<float> random_bf16_rows(int64_t rows, int64_t width, bool scale_rows, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    const float magnitude = scale_rows ? kRowMagnitudes[r % 4] : 1.0f;
    for (int64_t c = 0; c < width; ++c)
      values[r * width + c] = round_to_bf16(magnitude * normal(rng));
  }
  return values;
}

// The GPU forward pass on bf16 x: out as bf16 values and rstd.
struct ForwardResult {
  std::vector<float> out;
  std::vector<float> rstd;
};

ForwardResult cuda_forward(const std::vector<float>& x, int64_t width, double scale) {
  const DeviceBuffer x_gpu = upload(to_bf16_bits(x));
  const DeviceBuffer out_gpu(Device::kCuda, kRows * width * dtype_bytes(DType::kBF16));
  const DeviceBuffer rstd_gpu(Device::kCuda, kRows * dtype_bytes(DType::kF32));
  ops::rmsnorm_forward(cuda_view(out_gpu, {kRows, width}, DType::kBF16),
                       cuda_view(rstd_gpu, {kRows}, DType::kF32),
                       cuda_view(x_gpu, {kRows, width}, DType::kBF16), scale, ops::AmaxOutput());
  return {from_bf16_bits(download<uint16_t>(out_gpu)), download<float>(rstd_gpu)};
}

// The GPU backward pass: d_x as bf16 values, starting from d_x_initial (kept with Accumulate::kYes).
std::vector<float> cuda_backward(const std::vector<float>& d_x_initial, const std::vector<float>& d_out,
                                 const std::vector<float>& out, const std::vector<float>& rstd, int64_t width,
                                 double scale, ops::Accumulate mode) {
  const DeviceBuffer d_x_gpu = upload(to_bf16_bits(d_x_initial));
  const DeviceBuffer d_out_gpu = upload(to_bf16_bits(d_out));
  const DeviceBuffer out_gpu = upload(to_bf16_bits(out));
  const DeviceBuffer rstd_gpu = upload(rstd);
  ops::rmsnorm_backward(cuda_view(d_x_gpu, {kRows, width}, DType::kBF16),
                        cuda_view(d_out_gpu, {kRows, width}, DType::kBF16),
                        cuda_view(out_gpu, {kRows, width}, DType::kBF16),
                        cuda_view(rstd_gpu, {kRows}, DType::kF32), scale, mode);
  return from_bf16_bits(download<uint16_t>(d_x_gpu));
}

class CudaRmsNorm : public testing::TestWithParam<std::tuple<int64_t, double>> {
 protected:
  int64_t width() const { return std::get<0>(GetParam()); }
  double scale() const { return std::get<1>(GetParam()); }
  // Inputs are bf16 on both sides, so the outputs' rounding (kBf16Rounding) is the only bf16 error; the rest
  // is fp32 arithmetic done in a different order on each side.
  // Relative bound on how far two fp32 computations of one row's statistic may differ: each side sums `width`
  // terms in its own order (CPU SIMD lanes, GPU warp lanes and shuffles), and any order lies within
  // (width - 1) * 2^-24 of the exact sum, relative to the sum of the terms' magnitudes; a few more roundings
  // follow on each side (mean, eps, sqrt, reciprocal). rstd's error is half that of its sum, so for rstd this
  // has 2x margin. A missing eps moves the 1e-4 rows' rstd by 3.6x; a bf16-rounded rstd would be off by
  // ~2^-9.
  double fp32_reordering_bound() const { return 2.0 * static_cast<double>(width() + 8) * kFp32Rounding; }
};

TEST_P(CudaRmsNorm, ForwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  std::vector<float> x = random_bf16_rows(kRows, width(), /*scale_rows=*/true, rng);
  std::vector<float> out_cpu(x.size());
  std::vector<float> rstd_cpu(kRows);
  ops::rmsnorm_forward(cpu_view(out_cpu, {kRows, width()}), cpu_view(rstd_cpu, {kRows}),
                       cpu_view(x, {kRows, width()}), scale(), ops::AmaxOutput());
  const ForwardResult gpu = cuda_forward(x, width(), scale());

  for (int64_t r = 0; r < kRows; ++r) {
    ASSERT_NEAR(gpu.rstd[r], rstd_cpu[r], fp32_reordering_bound() * rstd_cpu[r]) << "row " << r;
  }
  // out = x * rstd * scale: the rstd difference, then one rounding to bf16.
  const double out_tolerance = kBf16Rounding + 2 * fp32_reordering_bound();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(gpu.out[i], out_cpu[i], out_tolerance * std::abs(out_cpu[i]))
        << "row " << i / width() << ", column " << i % width();
  }
}

TEST_P(CudaRmsNorm, BackwardMatchesCpuInBothAccumulateModes) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  const std::vector<float> x = random_bf16_rows(kRows, width(), /*scale_rows=*/true, rng);
  // Both sides differentiate at the GPU's forward results, so the comparison is of the backward pass alone.
  ForwardResult forward = cuda_forward(x, width(), scale());
  std::vector<float> d_out = random_bf16_rows(kRows, width(), /*scale_rows=*/false, rng);
  const std::vector<float> d_x_initial = random_bf16_rows(kRows, width(), /*scale_rows=*/false, rng);

  for (ops::Accumulate mode : {ops::Accumulate::kNo, ops::Accumulate::kYes}) {
    SCOPED_TRACE(mode == ops::Accumulate::kYes ? "Accumulate::kYes" : "Accumulate::kNo");
    std::vector<float> d_x_cpu = d_x_initial;
    ops::rmsnorm_backward(cpu_view(d_x_cpu, {kRows, width()}), cpu_view(d_out, {kRows, width()}),
                          cpu_view(forward.out, {kRows, width()}), cpu_view(forward.rstd, {kRows}), scale(),
                          mode);
    // With kNo the initial d_x is garbage that must be overwritten.
    const std::vector<float> d_x_gpu =
        cuda_backward(d_x_initial, d_out, forward.out, forward.rstd, width(), scale(), mode);

    for (int64_t r = 0; r < kRows; ++r) {
      const float* g = &d_out[r * width()];
      const float* y = &forward.out[r * width()];
      double dot_magnitude = 0;  // sum |d_out * out|: bounds the fp32 error of the row's dot product
      for (int64_t c = 0; c < width(); ++c)
        dot_magnitude += std::abs(static_cast<double>(g[c]) * y[c]);
      const double rstd = forward.rstd[r];
      for (int64_t c = 0; c < width(); ++c) {
        const size_t i = static_cast<size_t>(r * width() + c);
        // d_x = rstd * scale * g - rstd * y * dot / (width * scale) (+ d_x_initial): the fp32 differences
        // (the dot product summed in another order, a few roundings per term) are bounded relative to the
        // terms' magnitudes, with dot's magnitude sum |g * y|; then one rounding to bf16.
        double terms =
            rstd * scale() * std::abs(g[c]) + rstd * std::abs(y[c]) * dot_magnitude / (width() * scale());
        if (mode == ops::Accumulate::kYes) terms += std::abs(d_x_initial[i]);
        const double tolerance = kBf16Rounding * std::abs(d_x_cpu[i]) + fp32_reordering_bound() * terms;
        ASSERT_NEAR(d_x_gpu[i], d_x_cpu[i], tolerance) << "row " << r << ", column " << c;
      }
    }
  }
}

// out may alias x in the forward pass, and d_x may alias d_out in a kNo backward pass: same bits as out of
// place.
TEST_P(CudaRmsNorm, InPlaceMatchesOutOfPlace) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const std::vector<float> x = random_bf16_rows(kRows, width(), /*scale_rows=*/true, rng);
  const ForwardResult out_of_place = cuda_forward(x, width(), scale());

  const DeviceBuffer x_gpu = upload(to_bf16_bits(x));
  const DeviceBuffer rstd_gpu(Device::kCuda, kRows * dtype_bytes(DType::kF32));
  const TensorView x_view = cuda_view(x_gpu, {kRows, width()}, DType::kBF16);
  ops::rmsnorm_forward(x_view, cuda_view(rstd_gpu, {kRows}, DType::kF32), x_view, scale(), ops::AmaxOutput());
  EXPECT_EQ(from_bf16_bits(download<uint16_t>(x_gpu)), out_of_place.out);
  EXPECT_EQ(download<float>(rstd_gpu), out_of_place.rstd);

  const std::vector<float> d_out = random_bf16_rows(kRows, width(), /*scale_rows=*/false, rng);
  const std::vector<float> expected_d_x = cuda_backward(d_out, d_out, out_of_place.out, out_of_place.rstd,
                                                        width(), scale(), ops::Accumulate::kNo);
  const DeviceBuffer gradient_gpu = upload(to_bf16_bits(d_out));
  const DeviceBuffer out_gpu = upload(to_bf16_bits(out_of_place.out));
  const DeviceBuffer saved_rstd_gpu = upload(out_of_place.rstd);
  const TensorView gradient = cuda_view(gradient_gpu, {kRows, width()}, DType::kBF16);
  ops::rmsnorm_backward(gradient, gradient, cuda_view(out_gpu, {kRows, width()}, DType::kBF16),
                        cuda_view(saved_rstd_gpu, {kRows}, DType::kF32), scale(), ops::Accumulate::kNo);
  EXPECT_EQ(from_bf16_bits(download<uint16_t>(gradient_gpu)), expected_d_x);
}

INSTANTIATE_TEST_SUITE_P(WidthsAndScales, CudaRmsNorm,
                         testing::Combine(testing::Values<int64_t>(128, 1280, 72, 77),
                                          testing::Values(1.0, 1.2)),
                         [](const testing::TestParamInfo<CudaRmsNorm::ParamType>& info) {
                           return "width" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == 1.0 ? "_scale1" : "_scale1_2");
                         });

// The dtype checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaRmsNormContract, RejectsWrongDtypes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView x_bf16(nullptr, {4, 128}, DType::kBF16, Device::kCuda);
  const TensorView x_f32(nullptr, {4, 128}, DType::kF32, Device::kCuda);
  const TensorView rstd_f32(nullptr, {4}, DType::kF32, Device::kCuda);
  const TensorView rstd_bf16(nullptr, {4}, DType::kBF16, Device::kCuda);
  EXPECT_DEATH(ops::rmsnorm_forward(x_f32, rstd_f32, x_f32, 1.0, ops::AmaxOutput()),
               "rmsnorm_forward on CUDA: x must be bf16");
  EXPECT_DEATH(ops::rmsnorm_forward(x_bf16, rstd_bf16, x_bf16, 1.0, ops::AmaxOutput()),
               "rmsnorm_forward on CUDA: rstd must be f32");
  EXPECT_DEATH(ops::rmsnorm_backward(x_bf16, x_bf16, x_bf16, rstd_bf16, 1.0, ops::Accumulate::kNo),
               "rmsnorm_backward on CUDA: rstd must be f32");
}

}  // namespace
}  // namespace nanoforge::gpu_test
