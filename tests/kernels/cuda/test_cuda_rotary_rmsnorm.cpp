// CUDA rotary embedding with the QK-norm in one pass (bf16 x in place, f32 rstd and cos / sin) against the
// CPU op in fp32 on the same bf16-valued x, forward and backward. Head dims 128 (nanochat's: 16-byte packs of
// 8 pairs), 16 (one pack per half), 12 (no packs) and 2 (one pair); 1 to 10 heads; tables longer than the
// sequence (T_max > T) with angles that differ by position, so a wrong position, head or half shows; and a
// view one element into its buffer (no packs), with the elements around it checked untouched.
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

constexpr double kScale = 1.2;  // nanochat's QK-norm scale

struct Shape {
  int64_t batch, seq, heads, head_dim, table_rows;
  int64_t offset;  // elements from the start of x's buffer to its view
};

std::string shape_name(const testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  std::string name = "batch";  // appended piece by piece: GCC 12 misreports "B" + std::string (-Wrestrict)
  name += std::to_string(s.batch) + "_seq" + std::to_string(s.seq) + "_heads" + std::to_string(s.heads);
  name += "_dim" + std::to_string(s.head_dim) + (s.offset == 0 ? "_aligned" : "_offset");
  return name;
}

// nanochat's tables: angle (t, j) = t * base^(-2j / D), base 10000, in fp32.
void rotary_tables(int64_t rows, int64_t head_dim, std::vector<float>& cos, std::vector<float>& sin) {
  const int64_t half = head_dim / 2;
  cos.resize(static_cast<size_t>(rows * half));
  sin.resize(cos.size());
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < half; ++j) {
      const float inv_freq =
          1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(head_dim));
      const float angle = static_cast<float>(t) * inv_freq;
      cos[t * half + j] = std::cos(angle);
      sin[t * half + j] = std::sin(angle);
    }
  }
}

// Both sides compute the same fp32 values in different orders: the sums over a head (D terms: the sum of
// squares forward, mean(d out) backward) in any order lie within (D - 1) 2^-24 of the exact sum relative to
// the sum of the terms' magnitudes; every other value is a product or a two-term sum that either side may
// fuse into an FMA, a few roundings of 2^-24 of its terms. The GPU then rounds each output to bf16 once.
// These bounds, per element, in double from the inputs.
struct Bounds {
  std::vector<double> magnitude;  // |what is rounded to bf16|, from the terms: bounds the fp32 differences
  std::vector<double> fp32;       // how far the two sides' fp32 values may be apart
};

class CudaRotaryRmsNorm : public testing::TestWithParam<Shape> {
 protected:
  const Shape& shape() const { return GetParam(); }
  int64_t numel() const { return shape().batch * shape().seq * shape().heads * shape().head_dim; }
  int64_t rows() const { return shape().batch * shape().seq * shape().heads; }
  double sum_bound() const { return static_cast<double>(shape().head_dim + 8) * kFp32Rounding; }

  TensorView cos_view(const DeviceBuffer& table) const {
    return cuda_view(table, {shape().table_rows, shape().head_dim / 2}, DType::kF32);
  }

  // Forward: r = (x1 c + x2 s, -x1 s + x2 c) within 3 2^-24 (|x1| + |x2|) on either side (|c|, |s| <= 1);
  // the sums of squares then differ by the reordering, (D - 1) 2^-24, and by r's errors, at most 12 2^-24
  // of the sum (a rotation keeps x1^2 + x2^2, and |x1| + |x2| <= sqrt(2 (x1^2 + x2^2))): rstd within half
  // of (D + 11) 2^-24 plus 3 roundings (sqrt, division, eps), under (D + 12) 2^-24; out = r rstd scale
  // adds two product roundings. 6 2^-24 + sum_bound() of (|x1| + |x2|) rstd scale covers it for D >= 2.
  Bounds forward_bounds(const std::vector<float>& x, const std::vector<float>& rstd) const {
    const Shape& s = shape();
    const int64_t half = s.head_dim / 2;
    Bounds bounds{std::vector<double>(x.size()), std::vector<double>(x.size())};
    for (int64_t row = 0; row < rows(); ++row) {
      const double multiplier = rstd[row] * kScale;
      for (int64_t j = 0; j < half; ++j) {
        const int64_t first = row * s.head_dim + j, second = first + half;
        const double pair = std::abs(x[first]) + std::abs(x[second]);  // |c|, |s| <= 1
        for (const int64_t i : {first, second}) {
          bounds.magnitude[i] = pair * multiplier;
          bounds.fp32[i] = (6 * kFp32Rounding + sum_bound()) * pair * multiplier;
        }
      }
    }
    return bounds;
  }

  // Backward: n = rstd (scale d - y p) with p = mean(d y) / scale; p within sum_bound() sum|d y| / D /
  // scale; then the transpose rotation of (n1, n2).
  Bounds backward_bounds(const std::vector<float>& d, const std::vector<float>& y,
                         const std::vector<float>& rstd) const {
    const Shape& s = shape();
    const int64_t half = s.head_dim / 2;
    Bounds bounds{std::vector<double>(d.size()), std::vector<double>(d.size())};
    for (int64_t row = 0; row < rows(); ++row) {
      const int64_t start = row * s.head_dim;
      double dot = 0, dot_magnitude = 0;
      for (int64_t c = 0; c < s.head_dim; ++c) {
        dot += static_cast<double>(d[start + c]) * y[start + c];
        dot_magnitude += std::abs(static_cast<double>(d[start + c]) * y[start + c]);
      }
      const double projection = std::abs(dot) / s.head_dim / kScale;
      const double projection_error = sum_bound() * dot_magnitude / s.head_dim / kScale;
      std::vector<double> n_magnitude(s.head_dim), n_error(s.head_dim);
      for (int64_t c = 0; c < s.head_dim; ++c) {
        n_magnitude[c] = rstd[row] * (kScale * std::abs(d[start + c]) + std::abs(y[start + c]) * projection);
        n_error[c] =
            4 * kFp32Rounding * n_magnitude[c] + rstd[row] * std::abs(y[start + c]) * projection_error;
      }
      for (int64_t j = 0; j < half; ++j) {
        const double pair = n_magnitude[j] + n_magnitude[j + half];
        const double error = n_error[j] + n_error[j + half] + 3 * kFp32Rounding * pair;
        for (const int64_t i : {start + j, start + j + half}) {
          bounds.magnitude[i] = pair;
          bounds.fp32[i] = error;
        }
      }
    }
    return bounds;
  }

  static void expect_within(const std::vector<float>& gpu, const std::vector<float>& cpu,
                            const Bounds& bounds, const char* what) {
    for (size_t i = 0; i < gpu.size(); ++i) {
      // The fp32 difference, then the GPU's rounding of a value at most magnitude + fp32 in size.
      const double tolerance = bounds.fp32[i] + kBf16Rounding * (bounds.magnitude[i] + bounds.fp32[i]);
      ASSERT_NEAR(gpu[i], cpu[i], tolerance) << what << " element " << i;
    }
  }
};

TEST_P(CudaRotaryRmsNorm, ForwardAndBackwardMatchCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const Shape& s = shape();
  std::mt19937 rng(31);
  const std::vector<float> x = random_bf16(numel(), 1.0f, rng);
  const std::vector<float> d_out = random_bf16(numel(), 1.0f, rng);
  std::vector<float> cos, sin;
  rotary_tables(s.table_rows, s.head_dim, cos, sin);
  const DeviceBuffer cos_gpu = upload(cos), sin_gpu = upload(sin);
  const std::vector<int64_t> dims{s.batch, s.seq, s.heads, s.head_dim};
  const std::initializer_list<int64_t> shape4{s.batch, s.seq, s.heads, s.head_dim};

  // Forward.
  std::vector<float> out_cpu = x, rstd_cpu(static_cast<size_t>(rows()));
  ops::rotary_rmsnorm_forward(cpu_view(out_cpu, dims), cpu_view(rstd_cpu, {rows()}),
                              cpu_view(cos, {s.table_rows, s.head_dim / 2}),
                              cpu_view(sin, {s.table_rows, s.head_dim / 2}), kScale);
  const PaddedOnGpu<uint16_t> x_gpu(to_bf16_bits(x), s.offset, DType::kBF16);
  const DeviceBuffer rstd_gpu(Device::kCuda, rows() * dtype_bytes(DType::kF32));
  ops::rotary_rmsnorm_forward(x_gpu.view(shape4), cuda_view(rstd_gpu, {rows()}, DType::kF32),
                              cos_view(cos_gpu), cos_view(sin_gpu), kScale);
  const std::vector<float> out = from_bf16_bits(x_gpu.contents());
  std::vector<float> rstd = download<float>(rstd_gpu);
  for (int64_t row = 0; row < rows(); ++row)
    ASSERT_NEAR(rstd[row], rstd_cpu[row], (sum_bound() + 4 * kFp32Rounding) * rstd_cpu[row])
        << "rstd " << row;
  expect_within(out, out_cpu, forward_bounds(x, rstd_cpu), "forward");

  // Backward, both sides at the GPU's forward results (out, rstd), so only the backward is compared.
  std::vector<float> d_x_cpu = d_out, out_values = out;
  ops::rotary_rmsnorm_backward(cpu_view(d_x_cpu, dims), cpu_view(out_values, dims), cpu_view(rstd, {rows()}),
                               cpu_view(cos, {s.table_rows, s.head_dim / 2}),
                               cpu_view(sin, {s.table_rows, s.head_dim / 2}), kScale);
  const PaddedOnGpu<uint16_t> d_x_gpu(to_bf16_bits(d_out), s.offset, DType::kBF16);
  const PaddedOnGpu<uint16_t> out_gpu(to_bf16_bits(out), s.offset, DType::kBF16);
  ops::rotary_rmsnorm_backward(d_x_gpu.view(shape4), out_gpu.view(shape4),
                               cuda_view(rstd_gpu, {rows()}, DType::kF32), cos_view(cos_gpu),
                               cos_view(sin_gpu), kScale);
  expect_within(from_bf16_bits(d_x_gpu.contents()), d_x_cpu, backward_bounds(d_out, out, rstd), "backward");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaRotaryRmsNorm,
                         testing::Values(Shape{2, 7, 3, 128, 9, 0}, Shape{2, 7, 3, 128, 9, 1},
                                         Shape{3, 4, 10, 16, 6, 0}, Shape{1, 5, 2, 12, 5, 0},
                                         Shape{2, 3, 1, 2, 4, 0}, Shape{1, 40, 10, 128, 64, 0}),
                         shape_name);

// The dtype and shape checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaRotaryRmsNormContract, RejectsWrongDtypesAndShapes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView x_bf16(nullptr, {1, 4, 2, 8}, DType::kBF16, Device::kCuda);
  const TensorView x_f32(nullptr, {1, 4, 2, 8}, DType::kF32, Device::kCuda);
  const TensorView rstd(nullptr, {8}, DType::kF32, Device::kCuda);
  const TensorView rstd_bf16(nullptr, {8}, DType::kBF16, Device::kCuda);
  const TensorView short_rstd(nullptr, {7}, DType::kF32, Device::kCuda);
  const TensorView table_f32(nullptr, {4, 4}, DType::kF32, Device::kCuda);
  const TensorView table_bf16(nullptr, {4, 4}, DType::kBF16, Device::kCuda);
  const TensorView short_table(nullptr, {3, 4}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x_f32, rstd, table_f32, table_f32, 1.2),
               "rotary_rmsnorm_forward on CUDA: x must be bf16");
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x_bf16, rstd_bf16, table_f32, table_f32, 1.2),
               "rotary_rmsnorm_forward on CUDA: rstd must be f32");
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x_bf16, rstd, table_bf16, table_f32, 1.2),
               "rotary_rmsnorm_forward on CUDA: cos must be f32");
  EXPECT_DEATH(ops::rotary_rmsnorm_backward(x_bf16, x_bf16, rstd, table_f32, table_bf16, 1.2),
               "rotary_rmsnorm_backward on CUDA: sin must be f32");
  EXPECT_DEATH(ops::rotary_rmsnorm_backward(x_bf16, x_f32, rstd, table_f32, table_f32, 1.2),
               "rotary_rmsnorm_backward on CUDA: out must be bf16");
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x_bf16, rstd, short_table, short_table, 1.2),
               "must be \\(>= 4, 4\\)");
  EXPECT_DEATH(ops::rotary_rmsnorm_forward(x_bf16, short_rstd, table_f32, table_f32, 1.2),
               "must hold one value per head");
}

}  // namespace
}  // namespace nanoforge::gpu_test
