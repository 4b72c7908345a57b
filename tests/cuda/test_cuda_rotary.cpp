// CUDA rotary embedding (bf16 x in place, f32 cos / sin) against the CPU op in fp32 on the same bf16-valued
// x, forward and backward. Head dims 128 (nanochat's: 16-byte packs of 8 pairs), 16 (one pack per half), 12
// (no packs) and 2 (one pair); 1 to 10 heads; tables longer than the sequence (T_max > T) with angles that
// differ by position, so a wrong position, head or half shows; and a view one element into its buffer (no
// packs), with the elements around it checked untouched.
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

// The GPU's fp32 x1 c + x2 s and the CPU's may differ by the rounding of each product and of the sum (either
// side may fuse one product into an FMA): at most 3 * 2^-24 of |x1 c| + |x2 s|; 2^-21 leaves margin.
constexpr double kFp32Terms = 1.0 / (1 << 21);

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

class CudaRotary : public testing::TestWithParam<Shape> {
 protected:
  const Shape& shape() const { return GetParam(); }
  int64_t numel() const { return shape().batch * shape().seq * shape().heads * shape().head_dim; }

  // Rotates bf16 `x` on the GPU (forward or backward) and returns the result; checks the guard elements.
  std::vector<float> cuda_rotate(const std::vector<float>& x, const std::vector<float>& cos,
                                 const std::vector<float>& sin, bool forward) const {
    const Shape& s = shape();
    const PaddedOnGpu<uint16_t> x_gpu(to_bf16_bits(x), s.offset, DType::kBF16);
    const DeviceBuffer cos_gpu = upload(cos);
    const DeviceBuffer sin_gpu = upload(sin);
    const TensorView x_view = x_gpu.view({s.batch, s.seq, s.heads, s.head_dim});
    const TensorView cos_view = cuda_view(cos_gpu, {s.table_rows, s.head_dim / 2}, DType::kF32);
    const TensorView sin_view = cuda_view(sin_gpu, {s.table_rows, s.head_dim / 2}, DType::kF32);
    if (forward) {
      ops::rotary_forward(x_view, cos_view, sin_view);
    } else {
      ops::rotary_backward(x_view, cos_view, sin_view);
    }
    return from_bf16_bits(x_gpu.contents());
  }

  void check_against_cpu(bool forward) const {
    const Shape& s = shape();
    std::mt19937 rng(forward ? 31 : 32);
    const std::vector<float> x = random_bf16(numel(), 1.0f, rng);
    std::vector<float> cos, sin;
    rotary_tables(s.table_rows, s.head_dim, cos, sin);

    std::vector<float> cpu = x;
    const TensorView cpu_x = cpu_view(cpu, {s.batch, s.seq, s.heads, s.head_dim});
    const TensorView cpu_cos = cpu_view(cos, {s.table_rows, s.head_dim / 2});
    const TensorView cpu_sin = cpu_view(sin, {s.table_rows, s.head_dim / 2});
    if (forward) {
      ops::rotary_forward(cpu_x, cpu_cos, cpu_sin);
    } else {
      ops::rotary_backward(cpu_x, cpu_cos, cpu_sin);
    }
    const std::vector<float> gpu = cuda_rotate(x, cos, sin, forward);

    const int64_t half = s.head_dim / 2;
    for (int64_t i = 0; i < numel(); ++i) {
      // Element i is x1[j] or x2[j] of its head; both outputs combine x1[j] and x2[j] with c[j] and s[j].
      const int64_t j = i % s.head_dim % half;
      const int64_t head_start = i - i % s.head_dim;
      const int64_t t = i / (s.heads * s.head_dim) % s.seq;
      const double c = cos[t * half + j], sn = sin[t * half + j];
      const double terms = std::abs(x[head_start + j] * (i % s.head_dim < half ? c : sn)) +
                           std::abs(x[head_start + half + j] * (i % s.head_dim < half ? sn : c));
      ASSERT_NEAR(gpu[i], cpu[i], kBf16Rounding * std::abs(cpu[i]) + kFp32Terms * terms)
          << "element " << i << " (position " << i / (s.heads * s.head_dim) << ", head "
          << i / s.head_dim % s.heads << ", index " << i % s.head_dim << ")";
    }
  }
};

TEST_P(CudaRotary, ForwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  check_against_cpu(/*forward=*/true);
}

TEST_P(CudaRotary, BackwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  check_against_cpu(/*forward=*/false);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaRotary,
                         testing::Values(Shape{2, 7, 3, 128, 9, 0}, Shape{2, 7, 3, 128, 9, 1},
                                         Shape{3, 4, 10, 16, 6, 0}, Shape{1, 5, 2, 12, 5, 0},
                                         Shape{2, 3, 1, 2, 4, 0}, Shape{1, 40, 10, 128, 64, 0}),
                         shape_name);

// The dtype and shape checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaRotaryContract, RejectsWrongDtypesAndShortTables) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView x_bf16(nullptr, {1, 4, 2, 8}, DType::kBF16, Device::kCuda);
  const TensorView x_f32(nullptr, {1, 4, 2, 8}, DType::kF32, Device::kCuda);
  const TensorView table_f32(nullptr, {4, 4}, DType::kF32, Device::kCuda);
  const TensorView table_bf16(nullptr, {4, 4}, DType::kBF16, Device::kCuda);
  const TensorView short_table(nullptr, {3, 4}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::rotary_forward(x_f32, table_f32, table_f32), "rotary_forward on CUDA: x must be bf16");
  EXPECT_DEATH(ops::rotary_forward(x_bf16, table_bf16, table_f32), "rotary_forward on CUDA: cos must be f32");
  EXPECT_DEATH(ops::rotary_backward(x_bf16, table_f32, table_bf16),
               "rotary_backward on CUDA: sin must be f32");
  EXPECT_DEATH(ops::rotary_forward(x_bf16, short_table, short_table), "must be \\(>= 4, 4\\)");
}

}  // namespace
}  // namespace nanoforge::gpu_test
