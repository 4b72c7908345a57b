// CUDA gated value embeddings (bf16 v/u/d_v/d_u, fp32 gate weight, table, sigmoids and their gradients)
// against the CPU op in fp32 on the same bf16-valued inputs: forward, backward in the default (atomic table
// scatter) and deterministic (token-order scatter) modes, with every gradient added to nonzero starting
// values, and bitwise-equal repeats of the deterministic reductions. Shapes: d20's 10 kv heads of 128 with
// 1280 channels; heads of 6 (not whole packs: the unpacked kernels); and 8500 tokens, more than the
// backward's capped grid covers in one pass. Vocabularies are small, so ids repeat many times. Inputs are
// bf16 on both sides, so the outputs' rounding to bf16 is their only bf16 error.
#include <fmt/format.h>
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

constexpr int64_t kGateChannels = 12;  // nanochat's value-embedding gate reads u[..., :12]
constexpr double kGateRange = 3.0;     // gate = 3 * sigmoid

struct GateCase {
  int64_t rows, kv_heads, head_dim, channels, vocab;
};

// One case's inputs: v, u, d_v (bf16 values), the gate weight (uniform in [-0.3, 0.3], spreading the gate's
// pre-activation over the sigmoid), the table and ids (first and last ids included, the rest random).
struct GateInputs {
  GateCase shape;
  std::vector<float> v, u, d_v, gate_weight, table;
  std::vector<int32_t> ids;
  int64_t width() const { return shape.kv_heads * shape.head_dim; }
};

GateInputs make_inputs(const GateCase& shape, std::mt19937& rng) {
  GateInputs in{shape, {}, {}, {}, {}, {}, {}};
  const int64_t width = in.width();
  in.v = random_bf16(shape.rows * width, 1.0f, rng);
  in.u = random_bf16(shape.rows * shape.channels, 1.0f, rng);
  in.d_v = random_bf16(shape.rows * width, 1.0f, rng);
  in.gate_weight = uniform_values(shape.kv_heads * kGateChannels, -0.3f, 0.3f, rng);
  in.table = uniform_values(shape.vocab * width, -1.0f, 1.0f, rng);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(shape.vocab - 1));
  in.ids.resize(static_cast<size_t>(shape.rows));
  for (int32_t& value : in.ids)
    value = id(rng);
  in.ids.front() = 0;
  in.ids.back() = static_cast<int32_t>(shape.vocab - 1);
  return in;
}

struct ForwardResult {
  std::vector<float> v, gate_sigmoid;
};

ForwardResult cuda_forward(const GateInputs& in) {
  const auto [N, H, D, C, V] = in.shape;
  const DeviceBuffer v = upload(to_bf16_bits(in.v));
  const DeviceBuffer gate_sigmoid(Device::kCuda, N * H * dtype_bytes(DType::kF32));
  const DeviceBuffer u = upload(to_bf16_bits(in.u));
  const DeviceBuffer gate_weight = upload(in.gate_weight);
  const DeviceBuffer table = upload(in.table);
  const DeviceBuffer ids = upload(in.ids);
  ops::value_embed_gate_forward(
      cuda_view(v, {N, H, D}, DType::kBF16), cuda_view(gate_sigmoid, {N, H}, DType::kF32),
      cuda_view(u, {N, C}, DType::kBF16), cuda_view(gate_weight, {H, kGateChannels}, DType::kF32),
      cuda_view(table, {V, H * D}, DType::kF32), cuda_view(ids, {N}, DType::kI32));
  return {from_bf16_bits(download<uint16_t>(v)), download<float>(gate_sigmoid)};
}

// The backward's outputs, each starting from the given values (the op adds to all three).
struct Gradients {
  std::vector<float> d_u, d_gate_weight, d_table;
};

Gradients cuda_backward(const GateInputs& in, const std::vector<float>& gate_sigmoid,
                        const Gradients& initial, const ops::KernelSettings& settings) {
  const auto [N, H, D, C, V] = in.shape;
  const DeviceBuffer d_u = upload(to_bf16_bits(initial.d_u));
  const DeviceBuffer d_gate_weight = upload(initial.d_gate_weight);
  const DeviceBuffer d_table = upload(initial.d_table);
  const DeviceBuffer d_v = upload(to_bf16_bits(in.d_v));
  const DeviceBuffer u = upload(to_bf16_bits(in.u));
  const DeviceBuffer sigmoid = upload(gate_sigmoid);
  const DeviceBuffer gate_weight = upload(in.gate_weight);
  const DeviceBuffer table = upload(in.table);
  const DeviceBuffer ids = upload(in.ids);
  ops::value_embed_gate_backward(
      cuda_view(d_u, {N, C}, DType::kBF16), cuda_view(d_gate_weight, {H, kGateChannels}, DType::kF32),
      cuda_view(d_table, {V, H * D}, DType::kF32), cuda_view(d_v, {N, H, D}, DType::kBF16),
      cuda_view(u, {N, C}, DType::kBF16), cuda_view(sigmoid, {N, H}, DType::kF32),
      cuda_view(gate_weight, {H, kGateChannels}, DType::kF32), cuda_view(table, {V, H * D}, DType::kF32),
      cuda_view(ids, {N}, DType::kI32), settings);
  return {from_bf16_bits(download<uint16_t>(d_u)), download<float>(d_gate_weight), download<float>(d_table)};
}

Gradients initial_gradients(const GateInputs& in, std::mt19937& rng) {
  return {random_bf16(in.shape.rows * in.shape.channels, 1.0f, rng),
          uniform_values(in.shape.kv_heads * kGateChannels, -1.0f, 1.0f, rng),
          uniform_values(in.shape.vocab * in.width(), -1.0f, 1.0f, rng)};
}

// d_table against the CPU's, both from `initial` and the same sigmoids.
void expect_table_gradient_matches_cpu(const GateInputs& in, const std::vector<float>& sigmoid,
                                       const Gradients& initial, const Gradients& cpu, const Gradients& gpu) {
  const auto [N, H, D, C, V] = in.shape;
  // d_table[id, c] = start + sum over the tokens with that id of 3 p d_v: both sides compute each term the
  // same way from the same inputs, and add k terms in fp32 (token order on the CPU and in deterministic mode,
  // any order with atomics), each order within (k + 1) * 2^-24 of the exact sum relative to the terms'
  // magnitudes. Two fp32 roundings per term (3 p, then times d_v; a fused multiply-add on the GPU skips one)
  // are covered by the same bound, doubled.
  std::vector<double> magnitude(cpu.d_table.size());
  std::vector<int64_t> uses(static_cast<size_t>(V), 0);
  for (size_t i = 0; i < magnitude.size(); ++i)
    magnitude[i] = std::abs(initial.d_table[i]);
  for (int64_t n = 0; n < N; ++n) {
    ++uses[in.ids[n]];
    for (int64_t c = 0; c < H * D; ++c) {
      magnitude[in.ids[n] * H * D + c] +=
          kGateRange * sigmoid[n * H + c / D] * std::abs(in.d_v[n * H * D + c]);
    }
  }
  for (int64_t id = 0; id < V; ++id) {
    for (int64_t c = 0; c < H * D; ++c) {
      const size_t i = static_cast<size_t>(id * H * D + c);
      const double tolerance = 2.0 * (uses[id] + 2) * kFp32Rounding * magnitude[i];
      ASSERT_NEAR(gpu.d_table[i], cpu.d_table[i], tolerance) << "id " << id << ", column " << c;
    }
  }
}

class CudaValueEmbedGate : public testing::TestWithParam<GateCase> {
 protected:
  // The backward against the CPU op, deterministic or not as `settings` say.
  void expect_backward_matches_cpu(const ops::KernelSettings& settings);
};

TEST_P(CudaValueEmbedGate, ForwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  GateInputs in = make_inputs(GetParam(), rng);
  const auto [N, H, D, C, V] = in.shape;
  std::vector<float> v_cpu = in.v, sigmoid_cpu(static_cast<size_t>(N * H));
  ops::value_embed_gate_forward(cpu_view(v_cpu, {N, H, D}), cpu_view(sigmoid_cpu, {N, H}),
                                cpu_view(in.u, {N, C}), cpu_view(in.gate_weight, {H, kGateChannels}),
                                cpu_view(in.table, {V, H * D}), cpu_view(in.ids, {N}));
  const ForwardResult gpu = cuda_forward(in);

  for (int64_t n = 0; n < N; ++n) {
    for (int64_t h = 0; h < H; ++h) {
      // The gate's pre-activation sums 12 fp32 products in another order on each side: each order is within
      // 11 * 2^-24 of the exact sum, relative to sum |u_j w_j|; the sigmoid's slope is at most 1/4, and expf,
      // the add and the division add a few ulps of the sigmoid (< 1).
      double magnitude = 0;
      for (int64_t j = 0; j < kGateChannels; ++j)
        magnitude += std::abs(static_cast<double>(in.u[n * C + j]) * in.gate_weight[h * kGateChannels + j]);
      const double sigmoid_tolerance = kFp32Rounding * (2.0 * kGateChannels * magnitude / 4 + 8);
      ASSERT_NEAR(gpu.gate_sigmoid[n * H + h], sigmoid_cpu[n * H + h], sigmoid_tolerance)
          << "token " << n << ", head " << h;
      for (int64_t d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>((n * H + h) * D + d);
        // v + 3 s e: the sigmoid's difference times |3 e|, a few fp32 roundings of the terms on each side,
        // then one rounding to bf16.
        const double embedding = kGateRange * std::abs(in.table[in.ids[n] * H * D + h * D + d]);
        const double tolerance = kBf16Rounding * std::abs(v_cpu[i]) + embedding * sigmoid_tolerance +
                                 6 * kFp32Rounding * (std::abs(in.v[i]) + embedding);
        ASSERT_NEAR(gpu.v[i], v_cpu[i], tolerance) << "token " << n << ", head " << h << ", element " << d;
      }
    }
  }
}

void CudaValueEmbedGate::expect_backward_matches_cpu(const ops::KernelSettings& settings) {
  std::mt19937 rng(32);
  GateInputs in = make_inputs(GetParam(), rng);
  const auto [N, H, D, C, V] = in.shape;
  // Both sides differentiate at the GPU's gate sigmoids, so this compares the backward pass alone.
  std::vector<float> sigmoid = cuda_forward(in).gate_sigmoid;
  const Gradients initial = initial_gradients(in, rng);
  Gradients cpu = initial;
  ops::value_embed_gate_backward(cpu_view(cpu.d_u, {N, C}), cpu_view(cpu.d_gate_weight, {H, kGateChannels}),
                                 cpu_view(cpu.d_table, {V, H * D}), cpu_view(in.d_v, {N, H, D}),
                                 cpu_view(in.u, {N, C}), cpu_view(sigmoid, {N, H}),
                                 cpu_view(in.gate_weight, {H, kGateChannels}), cpu_view(in.table, {V, H * D}),
                                 cpu_view(in.ids, {N}), settings);
  const Gradients gpu = cuda_backward(in, sigmoid, initial, settings);

  // Per (token, head): the bound on the two sides' difference in d_pre = (d_v . e) * 3 p (1 - p). Each side
  // sums the D-term dot product in its own order, within (D - 1) * 2^-24 of the exact value relative to sum
  // |d_v e|; the multiplications add a few ulps.
  std::vector<double> d_pre_tolerance(static_cast<size_t>(N * H)), d_pre_magnitude(d_pre_tolerance);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t h = 0; h < H; ++h) {
      double dot = 0, dot_magnitude = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double term =
            static_cast<double>(in.d_v[(n * H + h) * D + d]) * in.table[in.ids[n] * H * D + h * D + d];
        dot += term;
        dot_magnitude += std::abs(term);
      }
      const double p = sigmoid[n * H + h], slope = kGateRange * p * (1 - p);
      d_pre_tolerance[n * H + h] =
          slope * 2.0 * (D + 4) * kFp32Rounding * dot_magnitude + 8 * kFp32Rounding * slope * std::abs(dot);
      d_pre_magnitude[n * H + h] = slope * std::abs(dot);
    }
  }

  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(n * C + c);
      if (c >= kGateChannels) {  // the gate reads only the first 12 channels: the rest are left as they were
        ASSERT_EQ(gpu.d_u[i], initial.d_u[i]) << "token " << n << ", channel " << c;
        continue;
      }
      // d_u + sum_h d_pre_h w[h, c]: the d_pre differences times |w|, the H-term sum in fp32 in another order
      // (the GPU adds the starting value last), then one rounding to bf16.
      double difference = 0, magnitude = std::abs(initial.d_u[i]);
      for (int64_t h = 0; h < H; ++h) {
        const double w = std::abs(in.gate_weight[h * kGateChannels + c]);
        difference += d_pre_tolerance[n * H + h] * w;
        magnitude += d_pre_magnitude[n * H + h] * w;
      }
      const double tolerance =
          kBf16Rounding * std::abs(cpu.d_u[i]) + difference + 2.0 * (H + 4) * kFp32Rounding * magnitude;
      ASSERT_NEAR(gpu.d_u[i], cpu.d_u[i], tolerance) << "token " << n << ", channel " << c;
    }
  }

  // d_gate_weight[h, j] sums one term per token: the per-token differences add up; the GPU sums at most
  // N / 8192 + 1 tokens per warp in fp32, then 8 warps per block, then the blocks in fp64 (the CPU in fp64),
  // each order within (terms) * 2^-24 of the exact sum relative to the terms' magnitudes; the starting value
  // and the total are rounded to fp32 once more.
  const double summation_rounding = (static_cast<double>(N) / 8192 + 16) * kFp32Rounding;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = 0; j < kGateChannels; ++j) {
      double difference = 0, magnitude = 0;
      for (int64_t n = 0; n < N; ++n) {
        const double u = std::abs(in.u[n * C + j]);
        difference += d_pre_tolerance[n * H + h] * u;
        magnitude += d_pre_magnitude[n * H + h] * u;
      }
      const size_t i = static_cast<size_t>(h * kGateChannels + j);
      const double tolerance =
          difference + summation_rounding * magnitude +
          2 * kFp32Rounding * (std::abs(initial.d_gate_weight[i]) + std::abs(cpu.d_gate_weight[i]));
      ASSERT_NEAR(gpu.d_gate_weight[i], cpu.d_gate_weight[i], tolerance) << "head " << h << ", channel " << j;
    }
  }

  expect_table_gradient_matches_cpu(in, sigmoid, initial, cpu, gpu);
}

TEST_P(CudaValueEmbedGate, BackwardMatchesCpuWithAtomicTableScatter) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  expect_backward_matches_cpu(ops::KernelSettings{.deterministic = false});
}

TEST_P(CudaValueEmbedGate, BackwardMatchesCpuInDeterministicMode) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  expect_backward_matches_cpu(ops::KernelSettings{.deterministic = true});
}

// d_u and d_gate_weight never use atomics, and in deterministic mode neither does d_table: two runs give the
// same bits.
TEST_P(CudaValueEmbedGate, BackwardRepeatsBitwise) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(33);
  const GateInputs in = make_inputs(GetParam(), rng);
  const std::vector<float> sigmoid = cuda_forward(in).gate_sigmoid;
  const Gradients initial = initial_gradients(in, rng);
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic mode" : "atomic table scatter");
    const ops::KernelSettings settings{.deterministic = deterministic};
    const Gradients first = cuda_backward(in, sigmoid, initial, settings);
    const Gradients second = cuda_backward(in, sigmoid, initial, settings);
    EXPECT_EQ(first.d_u, second.d_u);
    EXPECT_EQ(first.d_gate_weight, second.d_gate_weight);
    if (deterministic) {
      EXPECT_EQ(first.d_table, second.d_table);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaValueEmbedGate,
                         testing::Values(GateCase{300, 10, 128, 1280, 50}, GateCase{37, 3, 6, 20, 7},
                                         GateCase{8500, 2, 8, 16, 300}),
                         [](const testing::TestParamInfo<GateCase>& info) {
                           return fmt::format("N{}_H{}_D{}_C{}_V{}", info.param.rows, info.param.kv_heads,
                                              info.param.head_dim, info.param.channels, info.param.vocab);
                         });

// The dtype and shape checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaValueEmbedGateContract, RejectsWrongDtypesAndShapes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView v(nullptr, {4, 2, 8}, DType::kBF16, Device::kCuda);
  const TensorView v_f32(nullptr, {4, 2, 8}, DType::kF32, Device::kCuda);
  const TensorView gate_sigmoid(nullptr, {4, 2}, DType::kF32, Device::kCuda);
  const TensorView u(nullptr, {4, 16}, DType::kBF16, Device::kCuda);
  const TensorView gate_weight(nullptr, {2, kGateChannels}, DType::kF32, Device::kCuda);
  const TensorView table(nullptr, {5, 16}, DType::kF32, Device::kCuda);
  const TensorView table_bf16(nullptr, {5, 16}, DType::kBF16, Device::kCuda);
  const TensorView table_too_narrow(nullptr, {5, 8}, DType::kF32, Device::kCuda);
  const TensorView ids(nullptr, {4}, DType::kI32, Device::kCuda);
  EXPECT_DEATH(ops::value_embed_gate_forward(v_f32, gate_sigmoid, u, gate_weight, table, ids),
               "value_embed_gate_forward on CUDA: v must be bf16");
  EXPECT_DEATH(ops::value_embed_gate_forward(v, gate_sigmoid, u, gate_weight, table_bf16, ids),
               "value_embed_gate_forward on CUDA: table must be f32");
  EXPECT_DEATH(ops::value_embed_gate_forward(v, gate_sigmoid, u, gate_weight, table_too_narrow, ids),
               "value_embed_gate_forward on CUDA: inconsistent shapes");
  EXPECT_DEATH(ops::value_embed_gate_backward(u, gate_weight, table_bf16, v, u, gate_sigmoid, gate_weight,
                                              table, ids, {}),
               "value_embed_gate_backward on CUDA: d_table must be f32");
}

}  // namespace
}  // namespace nanoforge::gpu_test
