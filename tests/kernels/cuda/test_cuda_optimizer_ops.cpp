// The CUDA optimizer ops (AdamW; Muon's Nesterov momentum, MuonEq, Frobenius normalisation and rescaling,
// NorMuon's variance reduction, the cautious update; squared_norm) against the CPU f32 ops on the same
// values: state tensors f32, the Muon matrix bf16 or f32 (a bf16 matrix's values, widened, are the CPU's
// input). Sizes leave tails after the last 16-byte pack and span many blocks, views start 16-byte aligned or
// one element past it (the unpacked kernels), and the reductions see zero and tiny rows. Tolerances count the
// roundings each value goes through; u = 2^-24 is fp32's unit roundoff. The contract checks need no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

constexpr double kU = kFp32Rounding;  // u in the bounds below: fp32 rounding to nearest, relative
// The GPU's whole-tensor sum of squares: each thread adds at most 2 packs (16 squares) and a tail element in
// fp32, then a warp tree and a block tree (5 levels each), and the block partials are added in double: fewer
// than 32 roundings, each at most u of the sum (the terms are positive). The CPU sums in double.
constexpr double kTensorSumRounding = 32 * kU;

// Elements: whole packs and a 3-element tail, many blocks with a tail, and a single element.
const std::vector<int64_t> kFlatSizes = {11, 300'007, 1};
// Views at the start of an allocation, and one element in (no 8- or 16-byte alignment for any dtype here).
const std::vector<int64_t> kOffsets = {0, 1};

// Every GPU test skips, saying why, where there is no usable GPU.
class GpuTest : public testing::Test {
 protected:
  void SetUp() override { NANOFORGE_SKIP_WITHOUT_GPU(); }
};
using CudaAdamW = GpuTest;
using CudaMuonNesterovMomentum = GpuTest;
using CudaCautiousWeightDecayStep = GpuTest;
using CudaFrobenius = GpuTest;
using CudaMuonEquilibrateRows = GpuTest;
using CudaNormuonVarianceReduce = GpuTest;
using CudaSquaredNorm = GpuTest;

// `values` as `dtype` would hold them (bf16: rounded to nearest), widened back to f32.
std::vector<float> representable(std::vector<float> values, DType dtype) {
  return dtype == DType::kBF16 ? rounded_to_bf16(std::move(values)) : values;
}

std::string describe(int64_t size, DType dtype, int64_t offset) {
  return std::to_string(size) + " elements, " + dtype_name(dtype) + ", offset " + std::to_string(offset);
}

// ---- AdamW ----

TEST_F(CudaAdamW, MatchesCpu) {
  ops::AdamWStep hyper{0.01, 0.8, 0.95, 1e-8, 0.1, 3};  // step 3: the bias corrections are far from 1
  const double decay = 1 - hyper.lr * hyper.weight_decay;
  const double step_size = hyper.lr / (1 - std::pow(hyper.beta1, 3));
  const double inv_sqrt_bias2 = 1 / std::sqrt(1 - std::pow(hyper.beta2, 3));
  std::mt19937 rng(1);
  for (int64_t size : kFlatSizes) {
    for (int64_t offset : kOffsets) {
      SCOPED_TRACE(describe(size, DType::kF32, offset));
      const std::vector<int64_t> shape = {size};
      std::vector<float> p = uniform_values(size, -1, 1, rng), g = uniform_values(size, -1, 1, rng);
      std::vector<float> m = uniform_values(size, -0.1, 0.1, rng), v = uniform_values(size, 0, 0.01, rng);
      GpuTensor p_gpu(p, shape, DType::kF32, offset), g_gpu(g, shape, DType::kF32, offset);
      GpuTensor m_gpu(m, shape, DType::kF32, offset), v_gpu(v, shape, DType::kF32, offset);
      ops::adamw_update(p_gpu.view, g_gpu.view, m_gpu.view, v_gpu.view, hyper);
      std::vector<float> p_cpu = p, m_cpu = m, v_cpu = v;
      ops::adamw_update(cpu_view(p_cpu, shape), cpu_view(g, shape), cpu_view(m_cpu, shape),
                        cpu_view(v_cpu, shape), hyper);
      // m = m + w1 (g - m) and v = v + w2 (g^2 - v): three or four roundings on the CPU, two or three on the
      // GPU (which fuses multiply-adds), each at most ~1.2 u of |m| + |g| (or |v| + g^2): under 6 u together.
      auto m_bound = [&](size_t i) { return 6 * kU * (std::abs(m[i]) + std::abs(g[i])); };
      auto v_bound = [&](size_t i) { return 6 * kU * (v[i] + g[i] * g[i]); };
      // p = p decay - t, t = step_size m / (sqrt(v) c + eps): t goes through five roundings on the CPU and
      // four on the GPU, p decay and the difference through one or two more each (11 u of t, 3 u of p decay
      // at most), plus the moments' differences carried through t (dt = step_size dm / den, dt / t = dv /
      // 2v).
      auto p_bound = [&](size_t i) {
        const double den = std::sqrt(static_cast<double>(v_cpu[i])) * inv_sqrt_bias2 + hyper.eps;
        const double t = step_size * std::abs(m_cpu[i]) / den;
        double bound = 12 * kU * (std::abs(p[i]) * decay + t) + step_size * m_bound(i) / den;
        if (v_cpu[i] > 0) bound += t * v_bound(i) / (2 * v_cpu[i]);
        return bound;
      };
      expect_within(m_gpu.values(), m_cpu, m_bound, "exp_avg");
      expect_within(v_gpu.values(), v_cpu, v_bound, "exp_avg_sq");
      expect_within(p_gpu.values(), p_cpu, p_bound, "param");
    }
  }
}

// ---- Muon's elementwise steps ----

TEST_F(CudaMuonNesterovMomentum, MatchesCpuForBf16AndF32Updates) {
  const double mu = 0.95;
  std::mt19937 rng(2);
  for (DType update_dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t size : kFlatSizes) {
      for (int64_t offset : kOffsets) {
        SCOPED_TRACE(describe(size, update_dtype, offset));
        const std::vector<int64_t> shape = {size};
        std::vector<float> g = uniform_values(size, -1, 1, rng), m = uniform_values(size, -1, 1, rng);
        GpuTensor g_gpu(g, shape, DType::kF32, offset), m_gpu(m, shape, DType::kF32, offset);
        GpuTensor update_gpu(std::vector<float>(static_cast<size_t>(size)), shape, update_dtype, offset);
        ops::muon_nesterov_momentum(update_gpu.view, m_gpu.view, g_gpu.view, mu);
        std::vector<float> m_cpu = m, update_cpu(static_cast<size_t>(size));
        ops::muon_nesterov_momentum(cpu_view(update_cpu, shape), cpu_view(m_cpu, shape), cpu_view(g, shape),
                                    mu);
        // Two lerps, each three fp32 roundings on the CPU and two on the GPU (a fused multiply-add), each at
        // most ~1.05 u of |g| + |m|: under 6 u together. The update also carries the buffer's difference
        // (times mu), and a bf16 update one more rounding.
        auto m_bound = [&](size_t i) { return 6 * kU * (std::abs(g[i]) + std::abs(m[i])); };
        auto update_bound = [&](size_t i) {
          const double fp32 = 6 * kU * (std::abs(g[i]) + std::abs(m_cpu[i])) + mu * m_bound(i);
          return update_dtype == DType::kBF16 ? fp32 + kBf16Rounding * (std::abs(update_cpu[i]) + fp32)
                                              : fp32;
        };
        expect_within(m_gpu.values(), m_cpu, m_bound, "momentum_buffer");
        expect_within(update_gpu.values(), update_cpu, update_bound, "update");
      }
    }
  }
}

// update may alias grad (f32): the same bits as a separate output.
TEST_F(CudaMuonNesterovMomentum, UpdateMayAliasGrad) {
  std::mt19937 rng(3);
  const std::vector<int64_t> shape = {1031};
  const std::vector<float> g = uniform_values(1031, -1, 1, rng), m = uniform_values(1031, -1, 1, rng);
  GpuTensor g_separate(g, shape, DType::kF32, 0), m_separate(m, shape, DType::kF32, 0);
  GpuTensor update(g, shape, DType::kF32, 0);
  ops::muon_nesterov_momentum(update.view, m_separate.view, g_separate.view, 0.9);
  GpuTensor g_in_place(g, shape, DType::kF32, 0), m_in_place(m, shape, DType::kF32, 0);
  ops::muon_nesterov_momentum(g_in_place.view, m_in_place.view, g_in_place.view, 0.9);
  EXPECT_EQ(g_in_place.values(), update.values());
  EXPECT_EQ(m_in_place.values(), m_separate.values());
}

TEST_F(CudaCautiousWeightDecayStep, MatchesCpuForBf16AndF32Updates) {
  const double lr = 0.05, weight_decay = 0.5;  // the decay term is 2.5 % of |p|: a wrong mask shows at once
  std::mt19937 rng(4);
  for (DType update_dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t size : kFlatSizes) {
      for (int64_t offset : kOffsets) {
        SCOPED_TRACE(describe(size, update_dtype, offset));
        const std::vector<int64_t> shape = {size};
        std::vector<float> p = uniform_values(size, -1, 1, rng);
        std::vector<float> u = representable(uniform_values(size, -1, 1, rng), update_dtype);
        for (size_t i = 0; i < u.size(); i += 7)
          u[i] = 0;  // u * p = 0 counts as agreeing signs (decay applies)
        GpuTensor p_gpu(p, shape, DType::kF32, offset), u_gpu(u, shape, update_dtype, offset);
        ops::cautious_weight_decay_step(p_gpu.view, u_gpu.view, lr, weight_decay);
        std::vector<float> p_cpu = p;
        ops::cautious_weight_decay_step(cpu_view(p_cpu, shape), cpu_view(u, shape), lr, weight_decay);
        // The mask is the sign of the same fp32 product on both sides; then four roundings on the CPU and
        // three on the GPU (fused multiply-adds), each at most u of the terms |p|, lr |u| and lr wd |p|.
        expect_within(
            p_gpu.values(), p_cpu,
            [&](size_t i) {
              return 6 * kU * (std::abs(p[i]) * (1 + lr * weight_decay) + lr * std::abs(u[i]));
            },
            "param");
      }
    }
  }
}

// ---- Frobenius (re)normalisation ----

TEST_F(CudaFrobenius, NormalizeAndRescaleMatchCpu) {
  std::mt19937 rng(5);
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t size : kFlatSizes) {
      for (int64_t offset : kOffsets) {
        SCOPED_TRACE(describe(size, dtype, offset));
        const std::vector<int64_t> shape = {size};
        std::vector<float> x = representable(uniform_values(size, -2, 2, rng), dtype);
        // The factor: the sum's error halved by the square root, and its rounding to fp32 on each side;
        // then each side rounds the product once (to bf16 on the GPU for a bf16 x).
        const double factor_error = kTensorSumRounding / 2 + 2 * kU;
        auto bound_for = [&](const std::vector<float>& cpu) {
          return [&, dtype](size_t i) {
            const double fp32 = (factor_error + 2 * kU) * std::abs(cpu[i]);
            return dtype == DType::kBF16 ? fp32 + kBf16Rounding * (std::abs(cpu[i]) + fp32) : fp32;
          };
        };
        GpuTensor normalized(x, shape, dtype, offset);
        ops::normalize_frobenius(normalized.view, 1.02, 1e-7);
        std::vector<float> normalized_cpu = x;
        ops::normalize_frobenius(cpu_view(normalized_cpu, shape), 1.02, 1e-7);
        expect_within(normalized.values(), normalized_cpu, bound_for(normalized_cpu), "normalize_frobenius");

        GpuTensor rescaled(x, shape, dtype, offset);
        ops::rescale_frobenius(rescaled.view, 3.0, 1e-7);
        std::vector<float> rescaled_cpu = x;
        ops::rescale_frobenius(cpu_view(rescaled_cpu, shape), 3.0, 1e-7);
        expect_within(rescaled.values(), rescaled_cpu, bound_for(rescaled_cpu), "rescale_frobenius");
      }
    }
  }
}

// max(||x||, eps) keeps an all-zero tensor at zero (no 0 / 0).
TEST_F(CudaFrobenius, RescaleKeepsZerosAtZero) {
  GpuTensor zeros(std::vector<float>(1000, 0.0f), {10, 100}, DType::kBF16, 0);
  ops::rescale_frobenius(zeros.view, 3.0, 1e-7);
  EXPECT_EQ(zeros.values(), std::vector<float>(1000, 0.0f));
}

// ---- MuonEq and NorMuon: row and column statistics ----

// (rows, cols) uniform values in [-1, 1) with row 1 all zeros, row 2 tiny (norm below MuonEq's 1e-6 floor)
// and row 3 loud.
std::vector<float> matrix_with_special_rows(int64_t rows, int64_t cols, DType dtype, std::mt19937& rng) {
  std::vector<float> x = uniform_values(rows * cols, -1, 1, rng);
  for (int64_t c = 0; c < cols; ++c) {
    x[1 * cols + c] = 0;
    x[2 * cols + c] *= 1e-9f;
    x[3 * cols + c] *= 40;
  }
  return representable(x, dtype);
}

// A row of `length` squares summed on the GPU: each lane of a warp adds length / 32 of them in fp32, then
// five shuffle levels (rows); or each of 8 slices adds length / 8, then the 8 slices in order (columns).
// Either way fewer than length / 8 + 8 roundings, each at most u of the (positive) sum.
double line_sum_rounding(int64_t length) {
  return (static_cast<double>(length) / 8 + 8) * kU;
}

TEST_F(CudaMuonEquilibrateRows, MatchesCpu) {
  std::mt19937 rng(6);
  // 300 columns: whole f32 packs but not bf16 ones; 1280: packed; 77: never packed.
  const std::vector<std::vector<int64_t>> shapes = {{37, 300}, {64, 1280}, {5, 77}};
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (const std::vector<int64_t>& shape : shapes) {
      for (int64_t offset : kOffsets) {
        SCOPED_TRACE(describe(shape[0] * shape[1], dtype, offset) + ", " + std::to_string(shape[1]) +
                     " columns");
        std::vector<float> x = matrix_with_special_rows(shape[0], shape[1], dtype, rng);
        GpuTensor x_gpu(x, shape, dtype, offset);
        ops::muon_equilibrate_rows(x_gpu.view);
        std::vector<float> x_cpu = x;
        ops::muon_equilibrate_rows(cpu_view(x_cpu, shape));
        // factor = target / row norm: half the error of the total (a sum of row sums) and of the row's sum,
        // rounded to fp32 on each side; then the product's rounding on each side (bf16 on the GPU).
        const double factor_error = line_sum_rounding(shape[1]) + 2 * kU;
        expect_within(
            x_gpu.values(), x_cpu,
            [&](size_t i) {
              const double fp32 = (factor_error + 2 * kU) * std::abs(x_cpu[i]);
              return dtype == DType::kBF16 ? fp32 + kBf16Rounding * (std::abs(x_cpu[i]) + fp32) : fp32;
            },
            "x");
      }
    }
  }
}

TEST_F(CudaNormuonVarianceReduce, MatchesCpuPerRowAndPerColumn) {
  std::mt19937 rng(7);
  // (shape, second moment shape): tall with per-row statistics (whole bf16 packs), wide with per-column ones
  // (300 columns: nine full blocks of 32 and a partial one), square with per-row ones (never packed).
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{96, 40}, {96, 1}}, {{37, 300}, {1, 300}}, {{45, 45}, {45, 1}}};
  const double beta2 = 0.95;
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (const auto& [shape, state_shape] : cases) {
      for (int64_t offset : kOffsets) {
        SCOPED_TRACE(describe(shape[0] * shape[1], dtype, offset) + ", state " +
                     std::to_string(state_shape[0]) + "x" + std::to_string(state_shape[1]));
        const bool per_row = state_shape[1] == 1;
        const int64_t groups = per_row ? shape[0] : shape[1], reduced = per_row ? shape[1] : shape[0];
        std::vector<float> g = matrix_with_special_rows(shape[0], shape[1], dtype, rng);
        std::vector<float> state = uniform_values(groups, 0, 0.5, rng);
        if (per_row) {
          state[1] = 0;  // with row 1 all zeros the state stays 0: step = rsqrt(max(0, 1e-10)), no inf * 0
        } else {
          for (int64_t r = 0; r < shape[0]; ++r)
            g[r * shape[1]] = 0;  // column 0 all zeros, its state 0
          state[0] = 0;
        }
        GpuTensor g_gpu(g, shape, dtype, offset), state_gpu(state, state_shape, DType::kF32, offset);
        ops::normuon_variance_reduce(g_gpu.view, state_gpu.view, beta2);
        std::vector<float> g_cpu = g, state_cpu = state;
        ops::normuon_variance_reduce(cpu_view(g_cpu, shape), cpu_view(state_cpu, state_shape), beta2);
        // mean(g^2) carries its line sum's error; the state's lerp adds a few roundings of |s| + mean.
        const double line = line_sum_rounding(reduced);
        std::vector<double> means(static_cast<size_t>(groups));
        for (int64_t r = 0; r < shape[0]; ++r) {
          for (int64_t c = 0; c < shape[1]; ++c)
            means[per_row ? r : c] +=
                static_cast<double>(g[r * shape[1] + c]) * g[r * shape[1] + c] / reduced;
        }
        expect_within(
            state_gpu.values(), state_cpu,
            [&](size_t i) { return (1 - beta2) * line * means[i] + 6 * kU * (state[i] + means[i]); },
            "second_moment");
        // Each multiplier step * rescale: rsqrt halves the state's relative error (itself at most the line
        // sum's plus the lerp's roundings, relative to the state, which is at least (1 - beta2) mean), and
        // rescale's sums of squares add a line sum's error twice; 4 line sums' worth covers it with margin,
        // plus the product's rounding on each side (bf16 on the GPU).
        const double multiplier_error = 4 * line + 16 * kU;
        expect_within(
            g_gpu.values(), g_cpu,
            [&](size_t i) {
              const double fp32 = multiplier_error * std::abs(g_cpu[i]);
              return dtype == DType::kBF16 ? fp32 + kBf16Rounding * (std::abs(g_cpu[i]) + fp32) : fp32;
            },
            "g");
      }
    }
  }
}

// ---- squared_norm ----

TEST_F(CudaSquaredNorm, MatchesCpuAndRepeatsBitwise) {
  std::mt19937 rng(8);
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t size : {int64_t{1}, int64_t{1517}, int64_t{300'007}}) {
      for (int64_t offset : kOffsets) {
        SCOPED_TRACE(describe(size, dtype, offset));
        const std::vector<int64_t> shape = {size};
        std::vector<float> x = representable(uniform_values(size, -3, 3, rng), dtype);
        const GpuTensor x_gpu(x, shape, dtype, offset);
        const double gpu = ops::squared_norm(x_gpu.view);
        const double cpu = ops::squared_norm(cpu_view(x, shape));
        EXPECT_NEAR(gpu, cpu, kTensorSumRounding * cpu);
        EXPECT_EQ(ops::squared_norm(x_gpu.view), gpu);  // a fixed reduction order: the same bits again
      }
    }
  }
  const DeviceBuffer buffer(Device::kCuda, 16);
  EXPECT_EQ(ops::squared_norm(TensorView(buffer.data(), {0, 4}, DType::kBF16, Device::kCuda)), 0.0);
}

// ---- contracts: host-side checks, no GPU needed ----

TEST(CudaOptimizerOpsContract, RejectsWrongDtypesAndOverlap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto* base = reinterpret_cast<char*>(uintptr_t{1} << 20);
  const TensorView f32(base, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView f32_b(base + 4096, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView f32_c(base + 8192, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView f32_d(base + 12288, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView bf16(base + 16384, {4, 8}, DType::kBF16, Device::kCuda);
  const TensorView bf16_over_f32(base + 4100, {4, 8}, DType::kBF16, Device::kCuda);
  const TensorView i32(base + 20480, {4, 8}, DType::kI32, Device::kCuda);
  const TensorView state_bf16(base + 24576, {4, 1}, DType::kBF16, Device::kCuda);
  const TensorView state_wrong(base + 24576, {3, 1}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::adamw_update(bf16, f32_b, f32_c, f32_d, ops::AdamWStep{}),
               "adamw_update on CUDA: param must be f32");
  EXPECT_DEATH(ops::muon_nesterov_momentum(i32, f32, f32_b, 0.9),
               "muon_nesterov_momentum on CUDA: update must be bf16 or f32");
  EXPECT_DEATH(ops::muon_nesterov_momentum(bf16_over_f32, f32, f32_b, 0.9),
               "overlap without being the same tensor");
  EXPECT_DEATH(ops::muon_equilibrate_rows(i32), "muon_equilibrate_rows on CUDA: x must be bf16 or f32");
  EXPECT_DEATH(ops::normuon_variance_reduce(bf16, state_bf16, 0.95),
               "normuon_variance_reduce on CUDA: second_moment must be f32");
  EXPECT_DEATH(ops::normuon_variance_reduce(bf16, state_wrong, 0.95), "fits neither");
  EXPECT_DEATH(ops::cautious_weight_decay_step(bf16, f32, 0.1, 0.1),
               "cautious_weight_decay_step on CUDA: param must be f32");
  EXPECT_DEATH(ops::squared_norm(i32), "squared_norm on CUDA: x must be bf16 or f32");
}

}  // namespace
}  // namespace nanoforge::gpu_test
