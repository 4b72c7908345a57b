// CUDA embedding lookup (f32 table -> bf16 rows) and its scatter-add backward (bf16 rows -> f32 table)
// against the CPU op in fp32 on the same bf16-valued rows. Shapes cover d20's 1280 channels (16-byte packs,
// ten 128-column slabs in the ordered backward), 77 (no packs, a partial slab), 12 (packs in the backward
// only) and 8 (one pack per row), views one element into their buffers (no packs), and 1 to 1000 tokens: over
// 256 so that the ordered backward walks several rounds. Ids repeat a lot (40% of tokens share one id, the
// rest are uniform over a small vocabulary), so rows are summed from many tokens, in runs and interleaved.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

struct Shape {
  int64_t tokens;
  int64_t vocab;
  int64_t channels;
  int64_t offset;  // elements from the start of each buffer to its view: 0 (16-byte aligned) or 1 (not)
};

std::string shape_name(const testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return "tokens" + std::to_string(s.tokens) + "_vocab" + std::to_string(s.vocab) + "_channels" +
         std::to_string(s.channels) + (s.offset == 0 ? "_aligned" : "_offset");
}

// 40% of the tokens have id vocab / 3, the rest are uniform in [0, vocab).
std::vector<int32_t> skewed_ids(int64_t tokens, int64_t vocab, std::mt19937& rng) {
  std::bernoulli_distribution frequent(0.4);
  std::uniform_int_distribution<int32_t> any_id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int32_t& id : ids)
    id = frequent(rng) ? static_cast<int32_t>(vocab / 3) : any_id(rng);
  return ids;
}

class CudaEmbedding : public testing::TestWithParam<Shape> {
 protected:
  const Shape& shape() const { return GetParam(); }

  // The backward's random inputs (a starting d_table, bf16-valued d_out rows and skewed ids), and the CPU's
  // d_table from them.
  struct BackwardCase {
    std::vector<float> initial, d_out;
    std::vector<int32_t> ids;
    std::vector<float> d_table_cpu;
  };

  BackwardCase backward_case(uint32_t seed) const {
    const Shape& s = shape();
    std::mt19937 rng(seed);
    BackwardCase c;
    c.initial = normal_values(s.vocab * s.channels, 1.0f, rng);
    c.d_out = random_bf16(s.tokens * s.channels, 1.0f, rng);
    c.ids = skewed_ids(s.tokens, s.vocab, rng);
    c.d_table_cpu = c.initial;
    ops::embedding_backward(cpu_view(c.d_table_cpu, {s.vocab, s.channels}),
                            cpu_view(c.d_out, {s.tokens, s.channels}), cpu_view(c.ids, {s.tokens}), {});
    return c;
  }

  // d_table after the GPU backward from `initial`, deterministic or not as `settings` say.
  std::vector<float> cuda_backward(const std::vector<float>& initial, const std::vector<float>& d_out,
                                   const std::vector<int32_t>& ids,
                                   const ops::KernelSettings& settings) const {
    const Shape& s = shape();
    const PaddedOnGpu<float> d_table(initial, s.offset, DType::kF32);
    const PaddedOnGpu<uint16_t> grad(to_bf16_bits(d_out), s.offset, DType::kBF16);
    const PaddedOnGpu<int32_t> id_gpu(ids, s.offset, DType::kI32);
    ops::embedding_backward(d_table.view({s.vocab, s.channels}), grad.view({s.tokens, s.channels}),
                            id_gpu.view({s.tokens}), settings);
    return d_table.contents();
  }
};

// The forward pass only converts table values to bf16: exactly the CPU's f32 rows, rounded to nearest even.
TEST_P(CudaEmbedding, ForwardIsTheCpuRowsRoundedToBf16) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const Shape& s = shape();
  std::mt19937 rng(21);
  std::vector<float> table = normal_values(s.vocab * s.channels, 1.0f, rng);
  std::vector<int32_t> ids = skewed_ids(s.tokens, s.vocab, rng);
  std::vector<float> out_cpu(static_cast<size_t>(s.tokens * s.channels));
  ops::embedding_forward(cpu_view(out_cpu, {s.tokens, s.channels}), cpu_view(table, {s.vocab, s.channels}),
                         cpu_view(ids, {s.tokens}));

  const PaddedOnGpu<uint16_t> out(std::vector<uint16_t>(out_cpu.size(), 0), s.offset, DType::kBF16);
  const PaddedOnGpu<float> table_gpu(table, s.offset, DType::kF32);
  const PaddedOnGpu<int32_t> ids_gpu(ids, s.offset, DType::kI32);
  ops::embedding_forward(out.view({s.tokens, s.channels}), table_gpu.view({s.vocab, s.channels}),
                         ids_gpu.view({s.tokens}));
  const std::vector<uint16_t> out_gpu = out.contents();
  for (size_t i = 0; i < out_cpu.size(); ++i) {
    ASSERT_EQ(out_gpu[i], bf16_bits(out_cpu[i]))
        << "token " << i / s.channels << ", column " << i % s.channels;
  }
}

// Deterministic mode adds each table element's gradients in token order from its initial value, as the CPU
// does, with the same fp32 additions of the same values: the same bits, and the same bits on every run.
TEST_P(CudaEmbedding, DeterministicBackwardHasTheCpuBitsOnEveryRun) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const Shape& s = shape();
  const BackwardCase in = backward_case(22);

  const ops::KernelSettings deterministic{.deterministic = true};
  const std::vector<float> first_run = cuda_backward(in.initial, in.d_out, in.ids, deterministic);
  for (size_t i = 0; i < first_run.size(); ++i) {
    ASSERT_EQ(std::memcmp(&first_run[i], &in.d_table_cpu[i], sizeof(float)), 0)
        << "row " << i / s.channels << ", column " << i % s.channels << ": " << first_run[i] << " vs CPU "
        << in.d_table_cpu[i];
  }
  for (int run = 1; run < 3; ++run) {
    const std::vector<float> again = cuda_backward(in.initial, in.d_out, in.ids, deterministic);
    ASSERT_EQ(std::memcmp(again.data(), first_run.data(), again.size() * sizeof(float)), 0) << "run " << run;
  }
}

// The default backward adds with atomics in an order that can change; each element is the sum of its initial
// value and the gradients of its `count` tokens. Any order of those additions is within count * 2^-24 of the
// exact sum, relative to the sum of the magnitudes; the CPU's order too, so the two are within twice that.
// Rows no token uses keep their bits, and a row used once is one rounding on both sides: the same bits.
TEST_P(CudaEmbedding, AtomicBackwardMatchesCpu) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const Shape& s = shape();
  const BackwardCase in = backward_case(23);

  const std::vector<float> d_table_gpu =
      cuda_backward(in.initial, in.d_out, in.ids, ops::KernelSettings{.deterministic = false});
  const std::vector<float>& d_table_cpu = in.d_table_cpu;
  std::vector<int64_t> count(static_cast<size_t>(s.vocab), 0);
  std::vector<double> magnitude(in.initial.size());
  for (size_t i = 0; i < in.initial.size(); ++i)
    magnitude[i] = std::abs(in.initial[i]);
  for (int64_t n = 0; n < s.tokens; ++n) {
    ++count[in.ids[n]];
    for (int64_t c = 0; c < s.channels; ++c)
      magnitude[in.ids[n] * s.channels + c] += std::abs(in.d_out[n * s.channels + c]);
  }
  for (int64_t v = 0; v < s.vocab; ++v) {
    for (int64_t c = 0; c < s.channels; ++c) {
      const size_t i = static_cast<size_t>(v * s.channels + c);
      if (count[v] <= 1) {
        ASSERT_EQ(std::memcmp(&d_table_gpu[i], &d_table_cpu[i], sizeof(float)), 0)
            << "row " << v << " (used " << count[v] << " times), column " << c;
      } else {
        ASSERT_NEAR(d_table_gpu[i], d_table_cpu[i], 2.0 * count[v] * kFp32Rounding * magnitude[i])
            << "row " << v << " (used " << count[v] << " times), column " << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaEmbedding,
                         testing::Values(Shape{300, 50, 1280, 0}, Shape{300, 50, 1280, 1},
                                         Shape{37, 11, 77, 0}, Shape{1000, 4096, 12, 0}, Shape{600, 3, 8, 0},
                                         Shape{1, 5, 8, 0}),
                         shape_name);

// The dtype checks run on the host before any CUDA call, so this needs no GPU (and runs in CI).
TEST(CudaEmbeddingContract, RejectsWrongDtypes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView rows_bf16(nullptr, {4, 8}, DType::kBF16, Device::kCuda);
  const TensorView rows_f32(nullptr, {4, 8}, DType::kF32, Device::kCuda);
  const TensorView table_f32(nullptr, {5, 8}, DType::kF32, Device::kCuda);
  const TensorView table_bf16(nullptr, {5, 8}, DType::kBF16, Device::kCuda);
  const TensorView ids(nullptr, {4}, DType::kI32, Device::kCuda);
  const TensorView ids_f32(nullptr, {4}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::embedding_forward(rows_f32, table_f32, ids),
               "embedding_forward on CUDA: out must be bf16");
  EXPECT_DEATH(ops::embedding_forward(rows_bf16, table_bf16, ids),
               "embedding_forward on CUDA: table must be f32");
  EXPECT_DEATH(ops::embedding_forward(rows_bf16, table_f32, ids_f32),
               "embedding_forward on CUDA: ids must be i32");
  EXPECT_DEATH(ops::embedding_backward(table_bf16, rows_bf16, ids, {}),
               "embedding_backward on CUDA: d_table must be f32");
  EXPECT_DEATH(ops::embedding_backward(table_f32, rows_f32, ids, {}),
               "embedding_backward on CUDA: d_out must be bf16");
  const TensorView short_rows(nullptr, {3, 8}, DType::kBF16, Device::kCuda);
  EXPECT_DEATH(ops::embedding_forward(short_rows, table_f32, ids), "does not hold 4 rows of 8");
}

}  // namespace
}  // namespace nanoforge::gpu_test
