// cuDNN's fused attention (ops::attention_forward / attention_backward with KernelSettings' attention
// cudnn) against the CPU op in f32 on the same bf16-valued inputs: forward (out, lse) and backward (d_q, d_k,
// d_v) for B = 2, sequences of 17, 200 and 333 (none a multiple of cuDNN's tiles), windows 0, 63 and >= T
// (plain causal: no left bound), head dims 128 and 64, GQA 4/2 and plain 2/2 heads. Each case first asserts
// that cuDNN accepts its graphs (so a refusal fails rather than quietly running flash). Every output starts
// as NaN, so an element cuDNN never writes fails. Registered only in real GPU builds with cuDNN (the
// emulator has none). And the same through head slices of packed tensors, as the model calls it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention_implementation.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

constexpr int64_t kBatch = 2;
constexpr int64_t kPlainCausal = int64_t{1} << 20;  // a window past every sequence below
constexpr double kFp32Ulp = 1.0 / (1 << 23);

// cuDNN's kernels are closed, so the bounds below assume FlashAttention-2's rounding points (scores and
// softmax in fp32; P rounded to bf16 before P V and P^T dO; dS rounded to bf16 before dS K and dS^T Q; fp32
// accumulation; every result rounded to bf16) and double each bf16 term: a kernel may round a probability
// twice (P~ = exp(s - running max) in bf16, rescaled later in fp32), which costs at most one more 2^-8.
constexpr double kClosedKernelMargin = 2.0;

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
  ops::AttentionCalls calls() const { return {kBatch, seq, heads, kv_heads, head_dim, {window}, scale()}; }
};

// The ops' settings that choose cuDNN (and its deterministic backward where asked).
ops::KernelSettings cudnn_settings(bool deterministic = false) {
  return {.attention = ops::AttentionImplementation::kCudnn, .deterministic = deterministic};
}

class CudnnAttentionTest : public testing::Test {};

DeviceBuffer nan_buffer(int64_t count, DType dtype) {
  if (dtype == DType::kBF16) return upload(std::vector<uint16_t>(static_cast<size_t>(count), 0x7FC0u));
  return upload(std::vector<float>(static_cast<size_t>(count), std::nanf("")));
}

struct Inputs {
  std::vector<float> q, k, v, d_out;
};

// q and k with standard deviation 1.5: scale * q.k spreads over a few units, so softmax rows range from
// flat to peaked.
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

// cuDNN takes its workspace from the shared scratch; the op's own workspace is for a flash fallback, which
// these tests rule out, so it is empty.
TensorView no_workspace() {
  return TensorView(nullptr, {0}, DType::kBF16, Device::kCuda);
}

ForwardResult cudnn_forward(const AttentionCase& c, const Inputs& in) {
  const int64_t B = kBatch, T = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  const DeviceBuffer q = upload(to_bf16_bits(in.q));
  const DeviceBuffer k = upload(to_bf16_bits(in.k));
  const DeviceBuffer v = upload(to_bf16_bits(in.v));
  const DeviceBuffer out = nan_buffer(c.q_numel(), DType::kBF16);
  const DeviceBuffer lse = nan_buffer(c.lse_numel(), DType::kF32);
  ops::attention_forward(cuda_view(out, {B, T, H, D}, DType::kBF16), cuda_view(lse, {B, H, T}, DType::kF32),
                         cuda_view(q, {B, T, H, D}, DType::kBF16), cuda_view(k, {B, T, Hkv, D}, DType::kBF16),
                         cuda_view(v, {B, T, Hkv, D}, DType::kBF16), c.window, c.scale(), no_workspace(),
                         cudnn_settings());
  return {from_bf16_bits(download<uint16_t>(out)), download<float>(lse)};
}

Gradients cudnn_backward(const AttentionCase& c, const Inputs& in, const ForwardResult& forward,
                         bool deterministic = false) {
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
  ops::attention_backward(
      cuda_view(d_q, {B, T, H, D}, DType::kBF16), cuda_view(d_k, {B, T, Hkv, D}, DType::kBF16),
      cuda_view(d_v, {B, T, Hkv, D}, DType::kBF16), cuda_view(d_out, {B, T, H, D}, DType::kBF16),
      cuda_view(q, {B, T, H, D}, DType::kBF16), cuda_view(k, {B, T, Hkv, D}, DType::kBF16),
      cuda_view(v, {B, T, Hkv, D}, DType::kBF16), cuda_view(out, {B, T, H, D}, DType::kBF16),
      cuda_view(lse, {B, H, T}, DType::kF32), c.window, c.scale(), no_workspace(),
      cudnn_settings(deterministic));
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

// The CPU backward at cuDNN's forward results (bf16 out, f32 lse): the comparison is of the backward alone.
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

// Per-element bounds on |cuDNN - CPU|, from the rounding points above (kClosedKernelMargin):
//  - lse: a sum over the row's keys in fp32 ((keys + 16) ulp, the exponentials' approximation included) and
//    scores that differ by the fp32 dot products' rounding, 2 (D + 2) ulp of m_t = scale * max_j sum_d
//    |q_d k_d|; 4 ulp of |lse| for the final log and add.
//  - out_d = sum_j p_j v_jd: each p_j rounded to bf16 (2^-8 p_j |v_jd|), then out rounded to bf16.
//  - d_v = sum_t p_tj d_out_t: P rounded to bf16 again; d_q = scale sum_j dS_tj k_j and d_k = scale sum_t
//    dS_tj q_t with dS = p (dP - delta) rounded to bf16 (2^-8 |dS|) after fp32 dot products dP = dO.v and
//    delta = dO.o, each within 2 (D + 2) ulp of its sum of absolute terms.
// A mask that is off by one key moves a row's lse, out and gradients by that key's probability, far beyond
// these for the rows that give the key any weight.
struct Tolerances {
  std::vector<double> out, lse, d_q, d_k, d_v;
};

Tolerances tolerances(const AttentionCase& c, const Inputs& in, const ForwardResult& cudnn,
                      const ForwardResult& cpu, const Gradients& cpu_gradients) {
  const int64_t T = c.seq, H = c.heads, D = c.head_dim;
  const double scale = c.scale();
  const double dot_ulps = 2.0 * static_cast<double>(D + 2) * kFp32Ulp;
  const double bf16 = kClosedKernelMargin * kBf16Rounding;
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
        const float* out = &cudnn.out[c.q_index(b, t, h)];
        const int64_t first = c.first_key(t);
        double magnitude = 0;
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
        const double keys = static_cast<double>(t - first + 1);
        const double lse_cpu = cpu.lse[c.lse_index(b, h, t)];
        tol.lse[c.lse_index(b, h, t)] = kClosedKernelMargin * (dot_ulps * magnitude + (keys + 16) * kFp32Ulp +
                                                               4 * kFp32Ulp * std::abs(lse_cpu));
        double delta_magnitude = 0;
        for (int64_t d = 0; d < D; ++d)
          delta_magnitude += std::abs(static_cast<double>(d_out[d]) * out[d]);
        double delta = 0;
        for (int64_t d = 0; d < D; ++d)
          delta += static_cast<double>(d_out[d]) * out[d];
        const double lse_cudnn = cudnn.lse[c.lse_index(b, h, t)];
        for (int64_t j = first; j <= t; ++j) {
          const float* k = &in.k[c.kv_index(b, j, kv_head)];
          const float* v = &in.v[c.kv_index(b, j, kv_head)];
          const double p_forward = std::exp(score[j] - lse_cpu);
          const double p = std::exp(score[j] - lse_cudnn);
          double dp = 0, dp_magnitude = 0;
          for (int64_t d = 0; d < D; ++d) {
            dp += static_cast<double>(d_out[d]) * v[d];
            dp_magnitude += std::abs(static_cast<double>(d_out[d]) * v[d]);
          }
          const double ds_error =
              bf16 * std::abs(p * (dp - delta)) + p * dot_ulps * (dp_magnitude + delta_magnitude);
          double* tol_out = &tol.out[c.q_index(b, t, h)];
          double* tol_d_q = &tol.d_q[c.q_index(b, t, h)];
          double* tol_d_k = &tol.d_k[c.kv_index(b, j, kv_head)];
          double* tol_d_v = &tol.d_v[c.kv_index(b, j, kv_head)];
          for (int64_t d = 0; d < D; ++d) {
            tol_out[d] += bf16 * p_forward * std::abs(v[d]);
            tol_d_v[d] += bf16 * p * std::abs(d_out[d]);
            tol_d_k[d] += scale * ds_error * std::abs(q[d]);
            tol_d_q[d] += scale * ds_error * std::abs(k[d]);
          }
        }
      }
    }
  }
  // The final rounding of each result to bf16, and the lse's own error carried into out (relative dlse).
  const auto finish = [&](std::vector<double>& bound, const std::vector<float>& value) {
    for (size_t i = 0; i < bound.size(); ++i)
      bound[i] += bf16 * std::abs(value[i]);
  };
  finish(tol.out, cpu.out);
  finish(tol.d_q, cpu_gradients.d_q);
  finish(tol.d_k, cpu_gradients.d_k);
  finish(tol.d_v, cpu_gradients.d_v);
  return tol;
}

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
  EXPECT_EQ(violations, 0) << name << ": worst at flat index " << worst << ": cuDNN " << gpu[worst]
                           << ", CPU " << cpu[worst] << ", tolerance " << tolerance[worst];
}

// cuDNN's forward (out, lse) and backward (d_q, d_k, d_v, from its own forward) against the CPU op's.
void expect_matches_cpu(const AttentionCase& c, const Inputs& in, const ForwardResult& cudnn,
                        const Gradients& cudnn_gradients) {
  const ForwardResult cpu = cpu_forward(c, in);
  const Gradients cpu_gradients = cpu_backward(c, in, cudnn);
  const Tolerances tol = tolerances(c, in, cudnn, cpu, cpu_gradients);
  expect_close("lse", cudnn.lse, cpu.lse, tol.lse);
  expect_close("out", cudnn.out, cpu.out, tol.out);
  expect_close("d_q", cudnn_gradients.d_q, cpu_gradients.d_q, tol.d_q);
  expect_close("d_k", cudnn_gradients.d_k, cpu_gradients.d_k, tol.d_k);
  expect_close("d_v", cudnn_gradients.d_v, cpu_gradients.d_v, tol.d_v);
}

struct HeadShape {
  int64_t heads, kv_heads, head_dim;
};

class CudnnAttention : public CudnnAttentionTest,
                       public testing::WithParamInterface<std::tuple<int64_t, int64_t, HeadShape>> {
 protected:
  AttentionCase attention_case() const {
    const HeadShape shape = std::get<2>(GetParam());
    return {std::get<0>(GetParam()), std::get<1>(GetParam()), shape.heads, shape.kv_heads, shape.head_dim};
  }
};

TEST_P(CudnnAttention, ForwardAndBackwardMatchCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();  // a real GPU build configured on a machine without one
  const AttentionCase c = attention_case();
  const absl::Status supported = ops::check_cudnn_attention(c.calls(), nullptr);
  ASSERT_TRUE(supported.ok()) << supported;
  const Inputs in = random_inputs(c, static_cast<uint32_t>(c.seq * 1000 + c.window % 1000 + c.head_dim));

  const ForwardResult cudnn = cudnn_forward(c, in);
  expect_matches_cpu(c, in, cudnn, cudnn_backward(c, in, cudnn));
}

std::string case_name(const testing::TestParamInfo<CudnnAttention::ParamType>& info) {
  const HeadShape shape = std::get<2>(info.param);
  const int64_t window = std::get<1>(info.param);
  return "T" + std::to_string(std::get<0>(info.param)) + "_window" +
         (window == kPlainCausal ? std::string("Causal") : std::to_string(window)) + "_H" +
         std::to_string(shape.heads) + "_Hkv" + std::to_string(shape.kv_heads) + "_D" +
         std::to_string(shape.head_dim);
}

INSTANTIATE_TEST_SUITE_P(
    SequencesWindowsHeads, CudnnAttention,
    testing::Combine(testing::Values<int64_t>(17, 200, 333), testing::Values<int64_t>(0, 63, kPlainCausal),
                     testing::Values(HeadShape{4, 2, 128}, HeadShape{4, 2, 64}, HeadShape{2, 2, 128})),
    case_name);

// Deterministic mode asks for cuDNN's deterministic backward (no atomics on dQ): the same bits every run.
TEST_F(CudnnAttentionTest, DeterministicBackwardRepeatsBitForBit) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const AttentionCase c{333, 100, 4, 2, 128};
  ops::AttentionCalls calls = c.calls();
  calls.deterministic = true;
  const absl::Status supported = ops::check_cudnn_attention(calls, nullptr);
  ASSERT_TRUE(supported.ok()) << supported;
  const Inputs in = random_inputs(c, 5);
  const ForwardResult first = cudnn_forward(c, in);
  const Gradients first_gradients = cudnn_backward(c, in, first, /*deterministic=*/true);
  for (int repeat = 0; repeat < 3; ++repeat) {
    EXPECT_EQ(cudnn_forward(c, in).out, first.out);
    const Gradients again = cudnn_backward(c, in, first, /*deterministic=*/true);
    EXPECT_EQ(again.d_q, first_gradients.d_q);
    EXPECT_EQ(again.d_k, first_gradients.d_k);
    EXPECT_EQ(again.d_v, first_gradients.d_v);
  }
}

// q, k, v and d_q, d_k, d_v as head slices of packed tensors, as the model passes them (per position: Hkv
// heads of v, Hkv of k, H of q, as its vkq, plus one guard head here): cuDNN reads and writes them through
// strides. Against the CPU op as above; the guard heads keep their NaN bits, the inputs theirs.
TEST_F(CudnnAttentionTest, HeadSlicesOfPackedTensorsMatchCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const AttentionCase c{200, 63, 4, 2, 128};
  const int64_t B = kBatch, T = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  const int64_t R = 2 * Hkv + H + 1;
  ops::AttentionCalls calls = c.calls();
  calls.row_heads = R;
  const absl::Status supported = ops::check_cudnn_attention(calls, nullptr);
  ASSERT_TRUE(supported.ok()) << supported;
  const Inputs in = random_inputs(c, 11);
  // Heads [first, first + heads) of every position of a packed (B, T, R, D) tensor <-> a dense one.
  const auto put = [&](std::vector<uint16_t>& packed, const std::vector<float>& dense, int64_t first,
                       int64_t heads) {
    const std::vector<uint16_t> bits = to_bf16_bits(dense);
    for (int64_t token = 0; token < B * T; ++token)
      std::copy_n(bits.begin() + token * heads * D, heads * D, packed.begin() + (token * R + first) * D);
  };
  const auto take = [&](const std::vector<uint16_t>& packed, int64_t first, int64_t heads) {
    std::vector<uint16_t> bits(static_cast<size_t>(B * T * heads * D));
    for (int64_t token = 0; token < B * T; ++token)
      std::copy_n(packed.begin() + (token * R + first) * D, heads * D, bits.begin() + token * heads * D);
    return from_bf16_bits(bits);
  };
  const auto guards_are_nan = [&](const std::vector<uint16_t>& packed) {
    for (int64_t token = 0; token < B * T; ++token) {
      for (int64_t d = 0; d < D; ++d) {
        if (packed[static_cast<size_t>((token * R + R - 1) * D + d)] != 0x7FC0u) return false;
      }
    }
    return true;
  };
  std::vector<uint16_t> packed_bits(static_cast<size_t>(B * T * R * D), 0x7FC0u);
  put(packed_bits, in.v, 0, Hkv);
  put(packed_bits, in.k, Hkv, Hkv);
  put(packed_bits, in.q, 2 * Hkv, H);
  const DeviceBuffer packed = upload(packed_bits);
  const TensorView whole = cuda_view(packed, {B, T, R, D}, DType::kBF16);
  const HeadSlice v(whole, 0, Hkv), k(whole, Hkv, Hkv), q(whole, 2 * Hkv, H);

  const DeviceBuffer out = nan_buffer(c.q_numel(), DType::kBF16);
  const DeviceBuffer lse = nan_buffer(c.lse_numel(), DType::kF32);
  ops::attention_forward(cuda_view(out, {B, T, H, D}, DType::kBF16), cuda_view(lse, {B, H, T}, DType::kF32),
                         q, k, v, c.window, c.scale(), no_workspace(), cudnn_settings());
  const ForwardResult sliced{from_bf16_bits(download<uint16_t>(out)), download<float>(lse)};

  const DeviceBuffer d_out = upload(to_bf16_bits(in.d_out));
  const DeviceBuffer d_packed = nan_buffer(B * T * R * D, DType::kBF16);
  const TensorView d_whole = cuda_view(d_packed, {B, T, R, D}, DType::kBF16);
  ops::attention_backward(HeadSlice(d_whole, 2 * Hkv, H), HeadSlice(d_whole, Hkv, Hkv),
                          HeadSlice(d_whole, 0, Hkv), cuda_view(d_out, {B, T, H, D}, DType::kBF16), q, k, v,
                          cuda_view(out, {B, T, H, D}, DType::kBF16), cuda_view(lse, {B, H, T}, DType::kF32),
                          c.window, c.scale(), no_workspace(), cudnn_settings());
  const std::vector<uint16_t> d_bits = download<uint16_t>(d_packed);
  const Gradients sliced_gradients{take(d_bits, 2 * Hkv, H), take(d_bits, Hkv, Hkv), take(d_bits, 0, Hkv)};
  EXPECT_TRUE(guards_are_nan(d_bits)) << "a gradient was written into the guard head";
  EXPECT_EQ(download<uint16_t>(packed), packed_bits) << "the inputs changed";
  expect_matches_cpu(c, in, sliced, sliced_gradients);
}

// The shape checks run on the host before any cuDNN call.
TEST_F(CudnnAttentionTest, RejectsWhatTheContractForbids) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto bf16 = [](std::initializer_list<int64_t> shape) {
    return TensorView(nullptr, shape, DType::kBF16, Device::kCuda);
  };
  const TensorView lse(nullptr, {2, 4, 10}, DType::kF32, Device::kCuda);
  const TensorView q = bf16({2, 10, 4, 64}), kv = bf16({2, 10, 2, 64});
  EXPECT_DEATH(
      ops::attention_forward(q, bf16({2, 4, 10}), q, kv, kv, 5, 0.1, no_workspace(), cudnn_settings()),
      "attention_forward \\(cuDNN\\) on CUDA: lse must be f32");
  EXPECT_DEATH(ops::attention_forward(q, lse, q, bf16({2, 10, 3, 64}), bf16({2, 10, 3, 64}), 5, 0.1,
                                      no_workspace(), cudnn_settings()),
               "heads must be a multiple of kv heads");
  const TensorView misaligned(reinterpret_cast<void*>(uintptr_t{2}), {2, 10, 4, 64}, DType::kBF16,
                              Device::kCuda);
  EXPECT_DEATH(ops::attention_forward(q, lse, misaligned, kv, kv, 5, 0.1, no_workspace(), cudnn_settings()),
               "must start on a 16-byte boundary");
}

}  // namespace
}  // namespace nanoforge::gpu_test
