// The CPU FP8 ops against their definitions: fp8_quantize's codes are kernels/fp8_format.h's codes of x times
// the scale of the block's own amax (values outside the block cannot change it), in both layouts, with
// inv_scale = 1 / scale; fp8_matmul is the GEMM of the decoded, scaled operands (torch._scaled_mm on a CPU)
// into a block of columns, beta honoured; copy_columns moves exactly its block. A given amax replaces the
// block's own, and the ops that produce an FP8 GEMM's input write the amax of what they wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/fp8_format.h"
#include "kernels/ops.h"

namespace nanoforge {
namespace {

// One f32 on the CPU as a (1) view.
TensorView scalar(float& value) {
  return TensorView(&value, {1}, DType::kF32, Device::kCpu);
}

std::vector<float> normal(int64_t count, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> draw(0.0f, stddev);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values)
    v = draw(rng);
  return values;
}

TEST(Fp8Ops, QuantizeUsesTheBlocksOwnAmaxInBothLayouts) {
  const int64_t rows = 5, cols = 40, first = 8, width = 24;
  std::vector<float> x = normal(rows * cols, 2.0f, 1);
  x[3 * cols + 2] = 1e6f;  // outside the block: must not enter its amax
  std::vector<uint8_t> q(rows * width), q_t(width * rows);
  float inv_scale = 0, amax_written = -1;
  ops::fp8_quantize(TensorView(q.data(), {rows, width}, DType::kF8E4M3, Device::kCpu),
                    TensorView(q_t.data(), {width, rows}, DType::kF8E4M3, Device::kCpu), scalar(inv_scale),
                    scalar(amax_written), ops::Fp8Amax::kCompute,
                    TensorView(x.data(), {rows, cols}, DType::kF32, Device::kCpu), first);
  float amax = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      amax = std::max(amax, std::fabs(x[r * cols + first + c]));
  EXPECT_EQ(amax_written, amax);
  const float scale = fp8::tensorwise_scale(amax, fp8::Format::kE4m3);
  EXPECT_EQ(inv_scale, 1.0f / scale);
  int saturated = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const uint8_t expected = fp8::encode(x[r * cols + first + c] * scale, fp8::Format::kE4m3);
      EXPECT_EQ(q[r * width + c], expected) << r << "," << c;
      EXPECT_EQ(q_t[c * rows + r], expected) << r << "," << c;
      saturated += (expected & 0x7F) == 0x7E;
    }
  }
  EXPECT_GE(saturated, 1);  // the amax element lands exactly on +-448
}

// A given amax is used as it is (here one 4x the block's own), and the block is not read for another.
TEST(Fp8Ops, QuantizeWithAGivenAmaxScalesByIt) {
  const std::vector<float> x = normal(8 * 32, 1.0f, 4);
  float block_amax = 0;
  for (float v : x)
    block_amax = std::max(block_amax, std::fabs(v));
  float given = 4 * block_amax, inv_scale = 0;
  std::vector<uint8_t> q(8 * 32);
  ops::fp8_quantize(TensorView(q.data(), {8, 32}, DType::kF8E4M3, Device::kCpu), TensorView(),
                    scalar(inv_scale), scalar(given), ops::Fp8Amax::kGiven,
                    TensorView(const_cast<float*>(x.data()), {8, 32}, DType::kF32, Device::kCpu), 0);
  EXPECT_EQ(given, 4 * block_amax);  // read, not overwritten
  const float scale = fp8::tensorwise_scale(given, fp8::Format::kE4m3);
  EXPECT_EQ(inv_scale, 1.0f / scale);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(q[i], fp8::encode(x[i] * scale, fp8::Format::kE4m3)) << i;
}

// The ops that produce an FP8 GEMM's input write max |out| when asked, and the same outputs either way.
TEST(Fp8Ops, ProducersWriteTheAmaxOfWhatTheyWrote) {
  const int64_t rows = 6, width = 32;
  const std::vector<float> x = normal(rows * width, 3.0f, 5), x0 = normal(rows * width, 1.0f, 6);
  auto max_abs = [](const std::vector<float>& values) {
    float m = 0;
    for (float v : values)
      m = std::max(m, std::fabs(v));
    return m;
  };
  auto view = [&](const std::vector<float>& v) {
    return TensorView(const_cast<float*>(v.data()), {rows, width}, DType::kF32, Device::kCpu);
  };
  std::vector<float> out(rows * width), plain(rows * width), residual(rows * width), rstd(rows);
  const TensorView rstd_view(rstd.data(), {rows}, DType::kF32, Device::kCpu);
  float amax = -1;

  ops::rmsnorm_forward(view(out), rstd_view, view(x), 1.0, ops::AmaxOutput{scalar(amax)});
  ops::rmsnorm_forward(view(plain), rstd_view, view(x), 1.0, ops::AmaxOutput());
  EXPECT_EQ(out, plain);
  EXPECT_EQ(amax, max_abs(out));

  float a = 0.7f, b = -0.4f;
  amax = -1;
  ops::residual_mix_rmsnorm_forward(view(residual), view(out), rstd_view, view(x), view(x0), scalar(a),
                                    scalar(b), ops::AmaxOutput{scalar(amax)});
  ops::residual_mix_rmsnorm_forward(view(residual), view(plain), rstd_view, view(x), view(x0), scalar(a),
                                    scalar(b), ops::AmaxOutput());
  EXPECT_EQ(out, plain);
  EXPECT_EQ(amax, max_abs(out));

  amax = -1;
  ops::relu_squared_forward(view(out), view(x), ops::AmaxOutput{scalar(amax)});
  EXPECT_EQ(amax, max_abs(out));
  EXPECT_GT(amax, 0.0f);

  // A NaN anywhere makes the amax NaN (torch.max), so every code of the next quantisation is NaN.
  std::vector<float> with_nan = x;
  with_nan[7] = std::numeric_limits<float>::quiet_NaN();
  ops::rmsnorm_forward(view(out), rstd_view, view(with_nan), 1.0, ops::AmaxOutput{scalar(amax)});
  EXPECT_TRUE(std::isnan(amax));
}

TEST(Fp8Ops, QuantizeIntoTheTransposedLayoutAloneInE5m2) {
  std::vector<float> x = normal(4 * 16, 1.0f, 2);
  std::vector<uint8_t> q_t(16 * 4, 0xAB);
  float inv_scale = 0, amax_written = 0;
  ops::fp8_quantize(TensorView(), TensorView(q_t.data(), {16, 4}, DType::kF8E5M2, Device::kCpu),
                    scalar(inv_scale), scalar(amax_written), ops::Fp8Amax::kCompute,
                    TensorView(x.data(), {4, 16}, DType::kF32, Device::kCpu), 0);
  float amax = 0;
  for (float v : x)
    amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(inv_scale, 1.0f / fp8::tensorwise_scale(amax, fp8::Format::kE5m2));
  const float scale = fp8::tensorwise_scale(amax, fp8::Format::kE5m2);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 16; ++c)
      EXPECT_EQ(q_t[c * 4 + r], fp8::encode(x[r * 16 + c] * scale, fp8::Format::kE5m2));
}

TEST(Fp8Ops, MatmulIsTheGemmOfTheDecodedScaledOperands) {
  const int64_t m = 6, n = 16, k = 32, out_cols = 40, first = 8;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> code(0, 255);
  std::vector<uint8_t> a(m * k), b(n * k);
  for (auto& c : a)
    c = static_cast<uint8_t>(code(rng) & 0xF7);  // no NaN codes (S.1111.111 cleared)
  for (auto& c : b)
    c = static_cast<uint8_t>(code(rng) & 0xF7);
  float a_inv = 0.01f, b_inv = 0.03f;
  std::vector<float> out = normal(m * out_cols, 1.0f, 4), before = out;
  ops::fp8_matmul(TensorView(out.data(), {m, out_cols}, DType::kF32, Device::kCpu), first,
                  TensorView(a.data(), {m, k}, DType::kF8E4M3, Device::kCpu),
                  TensorView(&a_inv, {1}, DType::kF32, Device::kCpu),
                  TensorView(b.data(), {n, k}, DType::kF8E5M2, Device::kCpu),
                  TensorView(&b_inv, {1}, DType::kF32, Device::kCpu), 1.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < out_cols; ++j) {
      if (j < first || j >= first + n) {
        EXPECT_EQ(out[i * out_cols + j], before[i * out_cols + j]);  // outside the block: untouched
        continue;
      }
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double term =
            static_cast<double>(fp8::decode(a[i * k + p], fp8::Format::kE4m3) * a_inv) *
            static_cast<double>(fp8::decode(b[(j - first) * k + p], fp8::Format::kE5m2) * b_inv);
        sum += term;
        magnitude += std::fabs(term);
      }
      // fp32 accumulation in BLAS's order: within K roundings of the magnitude of the terms.
      const double expected = sum + before[i * out_cols + j];
      EXPECT_NEAR(out[i * out_cols + j], expected,
                  (k + 2) * 6e-8 * (magnitude + std::fabs(expected)) + 1e-30);
    }
  }
}

TEST(Fp8Ops, CopyColumnsMovesItsBlockOnly) {
  std::vector<float> src = normal(3 * 10, 1.0f, 5), dst(3 * 6, -1.0f);
  ops::copy_columns(TensorView(dst.data(), {3, 6}, DType::kF32, Device::kCpu), 2,
                    TensorView(src.data(), {3, 10}, DType::kF32, Device::kCpu), 5, 3);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 6; ++c) {
      const float expected = c >= 2 && c < 5 ? src[r * 10 + 5 + c - 2] : -1.0f;
      EXPECT_EQ(dst[r * 6 + c], expected);
    }
  }
}

}  // namespace
}  // namespace nanoforge
