// CUDA flash attention (bf16 q/k/v/out and gradients, f32 lse) against the CPU op in f32 on the same
// bf16-valued inputs: forward (out, lse) and backward (d_q, d_k, d_v) for B = 2, sequences of 1, 17, 64
// (one backward tile), 200 and 333 (odd tails of the 128-query forward tiles), windows 0, 1, 63, 64, 100 and
// >= T (plain causal), head dims 64 and 128, GQA 4/2 and plain 2/2 heads; then the tile edges (sequences of
// 128 and 257, windows around the key and query tiles, GQA 4/1, head dims 32 to 128) and head dim 32. Every
// output starts as NaN, so an element a kernel never writes fails. Tolerances: error bounds computed per
// element from the inputs (tolerances()); both passes must give the same bits on every run. CMake runs the
// suite twice: on the sm_90 profile, and on the sm_121 one with truncating tensor cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

constexpr int64_t kBatch = 2;
constexpr int64_t kPlainCausal = int64_t{1} << 20;  // a window past every sequence below

// One fp32 ulp relative to the value, 2^-23: a whole ulp per addition, because tensor-core fp32 accumulation
// is not guaranteed to round to nearest.
constexpr double kFp32Ulp = 1.0 / (1 << 23);
// Second-order terms (products of the first-order relative errors) and slack for the bounds below.
constexpr double kBoundMargin = 1.25;

struct AttentionCase {
  int64_t seq, window, heads, kv_heads, head_dim;

  int64_t group() const { return heads / kv_heads; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  int64_t q_index(int64_t b, int64_t t, int64_t h) const { return ((b * seq + t) * heads + h) * head_dim; }
  int64_t kv_index(int64_t b, int64_t t, int64_t h) const {
    return ((b * seq + t) * kv_heads + h) * head_dim;
  }
  int64_t lse_index(int64_t b, int64_t h, int64_t t) const { return (b * heads + h) * seq + t; }
  int64_t q_numel() const { return kBatch * seq * heads * head_dim; }
  int64_t kv_numel() const { return kBatch * seq * kv_heads * head_dim; }
  int64_t lse_numel() const { return kBatch * heads * seq; }
  int64_t first_key(int64_t t) const { return std::max<int64_t>(0, t - window); }
};

// A CUDA buffer holding `count` bf16 (or f32) NaNs: outputs start as NaN so that unwritten elements fail.
DeviceBuffer nan_buffer(int64_t count, DType dtype) {
  if (dtype == DType::kBF16) return upload(std::vector<uint16_t>(static_cast<size_t>(count), 0x7FC0u));
  return upload(std::vector<float>(static_cast<size_t>(count), std::nanf("")));
}

struct Inputs {
  std::vector<float> q, k, v, d_out;
};

// Normal values rounded to bf16: the values both sides see. q and k have standard deviation 1.5, so that
// scale * q.k has a standard deviation of about 2.25 and the softmax rows range from flat to peaked.
Inputs random_inputs(const AttentionCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Inputs in;
  in.q = random_bf16(c.q_numel(), 1.5f, rng);
  in.k = random_bf16(c.kv_numel(), 1.5f, rng);
  in.v = random_bf16(c.kv_numel(), 1.0f, rng);
  in.d_out = random_bf16(c.q_numel(), 1.0f, rng);
  return in;
}

struct ForwardResult {
  std::vector<float> out, lse;
};

struct Gradients {
  std::vector<float> d_q, d_k, d_v;
};

// A CUDA workspace of the size the op asks for, as a bf16 view (as the model's arena hands it out).
struct CudaWorkspace {
  explicit CudaWorkspace(const AttentionCase& c)
      : bytes(ops::attention_workspace_bytes(Device::kCuda, DType::kBF16, kBatch, c.seq, c.heads, c.kv_heads,
                                             c.head_dim, c.window)),
        buffer(Device::kCuda, bytes) {}
  TensorView view() const { return cuda_view(buffer, {bytes / 2}, DType::kBF16); }
  int64_t bytes;
  DeviceBuffer buffer;
};

ForwardResult cuda_forward(const AttentionCase& c, const Inputs& in) {
  const int64_t B = kBatch, T = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  const DeviceBuffer q = upload(to_bf16_bits(in.q));
  const DeviceBuffer k = upload(to_bf16_bits(in.k));
  const DeviceBuffer v = upload(to_bf16_bits(in.v));
  const DeviceBuffer out = nan_buffer(c.q_numel(), DType::kBF16);
  const DeviceBuffer lse = nan_buffer(c.lse_numel(), DType::kF32);
  const CudaWorkspace workspace(c);
  ops::attention_forward(cuda_view(out, {B, T, H, D}, DType::kBF16), cuda_view(lse, {B, H, T}, DType::kF32),
                         cuda_view(q, {B, T, H, D}, DType::kBF16), cuda_view(k, {B, T, Hkv, D}, DType::kBF16),
                         cuda_view(v, {B, T, Hkv, D}, DType::kBF16), c.window, c.scale(), workspace.view(),
                         {});
  return {from_bf16_bits(download<uint16_t>(out)), download<float>(lse)};
}

Gradients cuda_backward(const AttentionCase& c, const Inputs& in, const ForwardResult& forward) {
  const int64_t B = kBatch, T = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  const DeviceBuffer q = upload(to_bf16_bits(in.q));
  const DeviceBuffer k = upload(to_bf16_bits(in.k));
  const DeviceBuffer v = upload(to_bf16_bits(in.v));
  const DeviceBuffer d_out = upload(to_bf16_bits(in.d_out));
  const DeviceBuffer out = upload(to_bf16_bits(forward.out));
  const DeviceBuffer lse = upload(forward.lse);
  const DeviceBuffer d_q = nan_buffer(c.q_numel(), DType::kBF16);
  const DeviceBuffer d_k = nan_buffer(c.kv_numel(), DType::kBF16);
  const DeviceBuffer d_v = nan_buffer(c.kv_numel(), DType::kBF16);
  const CudaWorkspace workspace(c);
  ops::attention_backward(
      cuda_view(d_q, {B, T, H, D}, DType::kBF16), cuda_view(d_k, {B, T, Hkv, D}, DType::kBF16),
      cuda_view(d_v, {B, T, Hkv, D}, DType::kBF16), cuda_view(d_out, {B, T, H, D}, DType::kBF16),
      cuda_view(q, {B, T, H, D}, DType::kBF16), cuda_view(k, {B, T, Hkv, D}, DType::kBF16),
      cuda_view(v, {B, T, Hkv, D}, DType::kBF16), cuda_view(out, {B, T, H, D}, DType::kBF16),
      cuda_view(lse, {B, H, T}, DType::kF32), c.window, c.scale(), workspace.view(), {});
  return {from_bf16_bits(download<uint16_t>(d_q)), from_bf16_bits(download<uint16_t>(d_k)),
          from_bf16_bits(download<uint16_t>(d_v))};
}

std::vector<float> cpu_workspace(const AttentionCase& c) {
  const int64_t bytes = ops::attention_workspace_bytes(Device::kCpu, DType::kF32, kBatch, c.seq, c.heads,
                                                       c.kv_heads, c.head_dim, c.window);
  return std::vector<float>(static_cast<size_t>(bytes / 4));
}

ForwardResult cpu_forward(const AttentionCase& c, Inputs in) {
  const int64_t B = kBatch, T = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  ForwardResult r{std::vector<float>(in.q.size()), std::vector<float>(static_cast<size_t>(c.lse_numel()))};
  std::vector<float> workspace = cpu_workspace(c);
  ops::attention_forward(cpu_view(r.out, {B, T, H, D}), cpu_view(r.lse, {B, H, T}),
                         cpu_view(in.q, {B, T, H, D}), cpu_view(in.k, {B, T, Hkv, D}),
                         cpu_view(in.v, {B, T, Hkv, D}), c.window, c.scale(),
                         cpu_view(workspace, {static_cast<int64_t>(workspace.size())}), {});
  return r;
}

// The CPU backward at the GPU's forward results (bf16 out, f32 lse), so the comparison is of the backward
// alone.
Gradients cpu_backward(const AttentionCase& c, Inputs in, ForwardResult forward) {
  const int64_t B = kBatch, T = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  Gradients g{std::vector<float>(in.q.size()), std::vector<float>(in.k.size()),
              std::vector<float>(in.v.size())};
  std::vector<float> workspace = cpu_workspace(c);
  ops::attention_backward(
      cpu_view(g.d_q, {B, T, H, D}), cpu_view(g.d_k, {B, T, Hkv, D}), cpu_view(g.d_v, {B, T, Hkv, D}),
      cpu_view(in.d_out, {B, T, H, D}), cpu_view(in.q, {B, T, H, D}), cpu_view(in.k, {B, T, Hkv, D}),
      cpu_view(in.v, {B, T, Hkv, D}), cpu_view(forward.out, {B, T, H, D}), cpu_view(forward.lse, {B, H, T}),
      c.window, c.scale(), cpu_view(workspace, {static_cast<int64_t>(workspace.size())}), {});
  return g;
}

// How far the GPU may be from the CPU, element by element, derived from where the two differ:
//  - scores s = scale q.k: both sides sum D exact bf16 products in fp32, in different orders; each is within
//    (D + 2) ulp of the exact value relative to scale * sum |q_d k_d| (the row's largest such sum, m_t), so
//    they differ by at most ds_t = 2 (D + 2) ulp m_t. A probability exp(s - x) moves by a relative ds_t for
//    each of its two terms.
//  - the GPU rounds P to bf16 before P V and P^T dO (2^-8 each), and dS (the GPU before scaling, the same
//  relative error) before dS^T Q and
//    dS K (2^-8 each), and every result to bf16 (2^-8 of the value);
//  - sums over keys or queries add (terms + D + 16) ulp of relative error per side (lse's row sum, the fp32
//    accumulation of the GEMMs); dP = dO.v and delta = dO.o, dot products of D terms, differ by
//    2 (D + 2) ulp of sum |dO_d v_d| and of sum |dO_d o_d|.
// Each bound is the sum of these over the terms of the output, times kBoundMargin. A mask that is off by
// one key moves out, lse or a gradient by that key's probability, far above these for the rows that give
// the key any weight.
struct Tolerances {
  std::vector<double> out, lse, d_q, d_k, d_v;
};

Tolerances tolerances(const AttentionCase& c, const Inputs& in, const ForwardResult& gpu_forward,
                      const ForwardResult& cpu_forward_result, const Gradients& cpu_gradients) {
  const int64_t T = c.seq, H = c.heads, D = c.head_dim;
  const double scale = c.scale();
  const double sum_ulps = static_cast<double>(c.group() * T + D + 16) * kFp32Ulp;
  const double dot_ulps = 2.0 * static_cast<double>(D + 2) * kFp32Ulp;
  Tolerances tol{std::vector<double>(in.q.size()), std::vector<double>(static_cast<size_t>(c.lse_numel())),
                 std::vector<double>(in.q.size()), std::vector<double>(in.k.size()),
                 std::vector<double>(in.v.size())};
  std::vector<double> score(static_cast<size_t>(T));
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kv_head = h / c.group();
      for (int64_t t = 0; t < T; ++t) {
        const float* q = &in.q[c.q_index(b, t, h)];
        const float* d_out = &in.d_out[c.q_index(b, t, h)];
        const float* out = &gpu_forward.out[c.q_index(b, t, h)];
        const int64_t first = c.first_key(t);
        double magnitude = 0;  // m_t
        for (int64_t j = first; j <= t; ++j) {
          const float* k = &in.k[c.kv_index(b, j, kv_head)];
          double dot = 0, abs_dot = 0;
          for (int64_t d = 0; d < D; ++d) {
            dot += static_cast<double>(q[d]) * k[d];
            abs_dot += std::abs(static_cast<double>(q[d]) * k[d]);
          }
          score[j] = scale * dot;
          magnitude = std::max(magnitude, scale * abs_dot);
        }
        const double score_error = dot_ulps * magnitude;  // ds_t
        const double lse_cpu = cpu_forward_result.lse[c.lse_index(b, h, t)];
        const double keys = static_cast<double>(t - first + 1);
        tol.lse[c.lse_index(b, h, t)] = kBoundMargin * (score_error + (2 * keys + 16) * kFp32Ulp +
                                                        4 * kFp32Ulp * (std::abs(lse_cpu) + magnitude));
        // Forward: out_d = sum_j p_j v_jd, p from the GPU's own softmax (max, sum, bf16 rounding).
        const double p_forward_error = kBf16Rounding + 2 * score_error + 2 * sum_ulps;
        // Backward: p recomputed from the same lse on both sides, then dS = p (dP - delta).
        double delta = 0, delta_magnitude = 0;
        for (int64_t d = 0; d < D; ++d) {
          delta += static_cast<double>(d_out[d]) * out[d];
          delta_magnitude += std::abs(static_cast<double>(d_out[d]) * out[d]);
        }
        const double lse_gpu = gpu_forward.lse[c.lse_index(b, h, t)];
        for (int64_t j = first; j <= t; ++j) {
          const float* k = &in.k[c.kv_index(b, j, kv_head)];
          const float* v = &in.v[c.kv_index(b, j, kv_head)];
          const double p_forward = std::exp(score[j] - lse_cpu);
          const double p = std::exp(score[j] - lse_gpu);
          double dp = 0, dp_magnitude = 0;
          for (int64_t d = 0; d < D; ++d) {
            dp += static_cast<double>(d_out[d]) * v[d];
            dp_magnitude += std::abs(static_cast<double>(d_out[d]) * v[d]);
          }
          const double ds = p * (dp - delta);
          const double ds_error = (kBf16Rounding + 2 * score_error + sum_ulps) * std::abs(ds) +
                                  p * dot_ulps * (dp_magnitude + delta_magnitude);
          const double p_backward_error = (kBf16Rounding + 2 * score_error + sum_ulps) * p;
          double* tol_out = &tol.out[c.q_index(b, t, h)];
          double* tol_d_q = &tol.d_q[c.q_index(b, t, h)];
          double* tol_d_k = &tol.d_k[c.kv_index(b, j, kv_head)];
          double* tol_d_v = &tol.d_v[c.kv_index(b, j, kv_head)];
          for (int64_t d = 0; d < D; ++d) {
            tol_out[d] += p_forward_error * p_forward * std::abs(v[d]);
            tol_d_v[d] += p_backward_error * std::abs(d_out[d]);
            tol_d_k[d] += scale * ds_error * std::abs(q[d]);
            tol_d_q[d] += scale * ds_error * std::abs(k[d]);
          }
        }
      }
    }
  }
  // Then the final rounding of each result to bf16.
  const auto finish = [](std::vector<double>& bound, const std::vector<float>& cpu_value) {
    for (size_t i = 0; i < bound.size(); ++i)
      bound[i] = kBoundMargin * bound[i] + kBf16Rounding * std::abs(cpu_value[i]);
  };
  finish(tol.out, cpu_forward_result.out);
  finish(tol.d_q, cpu_gradients.d_q);
  finish(tol.d_k, cpu_gradients.d_k);
  finish(tol.d_v, cpu_gradients.d_v);
  return tol;
}

// Fails with the worst element (relative to its tolerance) if any GPU value is further from the CPU's than
// its tolerance, or is not finite.
void expect_close(const char* name, const std::vector<float>& gpu, const std::vector<float>& cpu,
                  const std::vector<double>& tolerance) {
  ASSERT_EQ(gpu.size(), cpu.size());
  int64_t violations = 0;
  size_t worst = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double difference = std::abs(static_cast<double>(gpu[i]) - cpu[i]);
    const double ratio = std::isfinite(difference) ? difference / tolerance[i] : INFINITY;
    if (!(difference <= tolerance[i])) ++violations;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_EQ(violations, 0) << name << ": worst at flat index " << worst << ": GPU " << gpu[worst] << ", CPU "
                           << cpu[worst] << ", tolerance " << tolerance[worst];
}

// Query heads, kv heads and head dim of a test case.
struct HeadShape {
  int64_t heads, kv_heads, head_dim;
};

class CudaAttention : public testing::TestWithParam<std::tuple<int64_t, int64_t, HeadShape>> {
 protected:
  AttentionCase attention_case() const {
    const HeadShape shape = std::get<2>(GetParam());
    return {std::get<0>(GetParam()), std::get<1>(GetParam()), shape.heads, shape.kv_heads, shape.head_dim};
  }
};

TEST_P(CudaAttention, ForwardAndBackwardMatchCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const AttentionCase c = attention_case();
  const Inputs in = random_inputs(c, static_cast<uint32_t>(c.seq * 1000 + c.window % 1000 + c.head_dim));

  const ForwardResult gpu_forward = cuda_forward(c, in);
  const ForwardResult cpu_forward_result = cpu_forward(c, in);
  const Gradients gpu_gradients = cuda_backward(c, in, gpu_forward);
  const Gradients cpu_gradients = cpu_backward(c, in, gpu_forward);
  const Tolerances tol = tolerances(c, in, gpu_forward, cpu_forward_result, cpu_gradients);

  expect_close("lse", gpu_forward.lse, cpu_forward_result.lse, tol.lse);
  expect_close("out", gpu_forward.out, cpu_forward_result.out, tol.out);
  expect_close("d_q", gpu_gradients.d_q, cpu_gradients.d_q, tol.d_q);
  expect_close("d_k", gpu_gradients.d_k, cpu_gradients.d_k, tol.d_k);
  expect_close("d_v", gpu_gradients.d_v, cpu_gradients.d_v, tol.d_v);
}

std::string case_name(const testing::TestParamInfo<CudaAttention::ParamType>& info) {
  const HeadShape shape = std::get<2>(info.param);
  const int64_t window = std::get<1>(info.param);
  return "T" + std::to_string(std::get<0>(info.param)) + "_window" +
         (window == kPlainCausal ? std::string("Causal") : std::to_string(window)) + "_H" +
         std::to_string(shape.heads) + "_Hkv" + std::to_string(shape.kv_heads) + "_D" +
         std::to_string(shape.head_dim);
}

INSTANTIATE_TEST_SUITE_P(SequencesWindowsHeads, CudaAttention,
                         testing::Combine(testing::Values<int64_t>(1, 17, 64, 200, 333),
                                          testing::Values<int64_t>(0, 1, 63, 64, 100, kPlainCausal),
                                          testing::Values(HeadShape{4, 2, 128}, HeadShape{4, 2, 64},
                                                          HeadShape{2, 2, 128}, HeadShape{2, 2, 64})),
                         case_name);

// Head dim 32 (the small models of the tests, e.g. the CORE golden's): fewer combinations, the same kernels.
INSTANTIATE_TEST_SUITE_P(HeadDim32, CudaAttention,
                         testing::Combine(testing::Values<int64_t>(17, 200),
                                          testing::Values<int64_t>(0, 63, kPlainCausal),
                                          testing::Values(HeadShape{4, 2, 32})),
                         case_name);

// The tiles' edges: a sequence of exactly one 128-query forward tile and one of two tiles and a row;
// windows one short of, equal to and one past the forward key tile at head dim 128 (32), around the query
// tile (127, 129: not a multiple of any tile), and 126: there an aligned block of rows (16 or 32) whose keys
// all lie below the diagonal has its farthest query exactly one key past the window of the tile's first key,
// the edge of "this tile needs no mask" in every kernel; 4 query heads per kv head.
INSTANTIATE_TEST_SUITE_P(
    TileEdges, CudaAttention,
    testing::Combine(testing::Values<int64_t>(128, 257), testing::Values<int64_t>(31, 32, 33, 126, 127, 129),
                     testing::Values(HeadShape{4, 1, 32}, HeadShape{4, 1, 64}, HeadShape{4, 1, 128})),
    case_name);

// No atomics anywhere: the same inputs give the same bits, run after run.
TEST(CudaAttentionDeterminism, RepeatedCallsGiveTheSameBits) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const AttentionCase c{333, 100, 4, 2, 128};
  const Inputs in = random_inputs(c, 5);
  const ForwardResult first = cuda_forward(c, in);
  const Gradients first_gradients = cuda_backward(c, in, first);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const ForwardResult again = cuda_forward(c, in);
    const Gradients again_gradients = cuda_backward(c, in, first);
    EXPECT_EQ(again.out, first.out);
    EXPECT_EQ(again.lse, first.lse);
    EXPECT_EQ(again_gradients.d_q, first_gradients.d_q);
    EXPECT_EQ(again_gradients.d_k, first_gradients.d_k);
    EXPECT_EQ(again_gradients.d_v, first_gradients.d_v);
  }
}

// The checks run on the host before any CUDA call, so these need no GPU (and run in CI).
TEST(CudaAttentionContract, RejectsWhatTheKernelsCannotRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto bf16 = [](std::initializer_list<int64_t> shape) {
    return TensorView(nullptr, shape, DType::kBF16, Device::kCuda);
  };
  const TensorView lse(nullptr, {2, 4, 10}, DType::kF32, Device::kCuda);
  const TensorView workspace = bf16({0});
  const TensorView q = bf16({2, 10, 4, 64}), kv = bf16({2, 10, 2, 64});
  EXPECT_DEATH(ops::attention_forward(bf16({2, 10, 4, 96}), lse, bf16({2, 10, 4, 96}), bf16({2, 10, 2, 96}),
                                      bf16({2, 10, 2, 96}), 5, 0.1, workspace, {}),
               "attention_forward on CUDA: head dim 96 is not supported");
  const TensorView q_f32(nullptr, {2, 10, 4, 64}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::attention_forward(q, lse, q_f32, kv, kv, 5, 0.1, workspace, {}),
               "attention_forward on CUDA: q must be bf16");
  EXPECT_DEATH(ops::attention_forward(q, bf16({2, 4, 10}), q, kv, kv, 5, 0.1, workspace, {}),
               "attention_forward on CUDA: lse must be f32");
  EXPECT_DEATH(
      ops::attention_forward(q, lse, q, bf16({2, 10, 3, 64}), bf16({2, 10, 3, 64}), 5, 0.1, workspace, {}),
      "heads must be a multiple of kv heads");
  const TensorView misaligned(reinterpret_cast<void*>(uintptr_t{2}), {2, 10, 4, 64}, DType::kBF16,
                              Device::kCuda);
  EXPECT_DEATH(ops::attention_forward(q, lse, misaligned, kv, kv, 5, 0.1, workspace, {}),
               "q must start on a 16-byte boundary");
  // The backward keeps delta (B, H, T) f32 in the workspace: 320 bytes here, given 2 * 159.
  EXPECT_DEATH(ops::attention_backward(q, kv, kv, q, q, kv, kv, q, lse, 5, 0.1, bf16({159}), {}),
               "attention_backward on CUDA: workspace .* needs 320");
}

}  // namespace
}  // namespace nanoforge::gpu_test
