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
#include "tests/cuda/gpu_test_support.h"

namespace nanoforge {
namespace {

using gpu_test::download;
using gpu_test::from_bf16_bits;
using gpu_test::to_bf16_bits;
using gpu_test::upload;
using gpu_test::view_of;

constexpr double kFp32Rounding = 1.0 / (1 << 24);
constexpr int64_t kGuardElements = 9;  // after each view; no op may touch them (nor those before it)

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

// A device copy of `values`, `offset` elements into its buffer and followed by guard elements. contents()
// reads the values back and checks that the elements around them kept their bits.
template <class HostT>
class PaddedOnGpu {
 public:
  PaddedOnGpu(const std::vector<HostT>& values, int64_t offset, DType dtype)
      : offset_(offset), count_(static_cast<int64_t>(values.size())), dtype_(dtype) {
    host_.assign(static_cast<size_t>(offset + count_ + kGuardElements), guard_value());
    std::copy(values.begin(), values.end(), host_.begin() + offset);
    buffer_ = upload(host_);
  }

  TensorView view(std::initializer_list<int64_t> shape) const {
    return view_of(buffer_, dtype_, offset_, count_).reshaped(shape);
  }

  std::vector<HostT> contents() const {
    const std::vector<HostT> all = download<HostT>(buffer_);
    for (size_t i = 0; i < all.size(); ++i) {
      if (static_cast<int64_t>(i) >= offset_ && static_cast<int64_t>(i) < offset_ + count_) continue;
      EXPECT_EQ(std::memcmp(&all[i], &host_[i], sizeof(HostT)), 0) << "guard element " << i << " changed";
    }
    return std::vector<HostT>(all.begin() + offset_, all.begin() + offset_ + count_);
  }

 private:
  static HostT guard_value() {
    if constexpr (sizeof(HostT) == 2) {
      return gpu_test::bf16_bits(-12345.0f);
    } else {
      return static_cast<HostT>(-12345);
    }
  }

  int64_t offset_;
  int64_t count_;
  DType dtype_;
  std::vector<HostT> host_;
  DeviceBuffer buffer_;
};

// 40% of the tokens have id vocab / 3, the rest are uniform in [0, vocab).
std::vector<int32_t> skewed_ids(int64_t tokens, int64_t vocab, std::mt19937& rng) {
  std::bernoulli_distribution frequent(0.4);
  std::uniform_int_distribution<int32_t> any_id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int32_t& id : ids)
    id = frequent(rng) ? static_cast<int32_t>(vocab / 3) : any_id(rng);
  return ids;
}

std::vector<float> normal_values(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values)
    v = normal(rng);
  return values;
}

std::vector<float> bf16_normal_values(int64_t count, std::mt19937& rng) {
  std::vector<float> values = normal_values(count, rng);
  for (float& v : values)
    v = gpu_test::round_to_bf16(v);
  return values;
}

TensorView cpu_view(std::vector<float>& values, std::initializer_list<int64_t> shape) {
  return TensorView(values.data(), shape, DType::kF32, Device::kCpu);
}
TensorView cpu_ids(std::vector<int32_t>& ids) {
  return TensorView(ids.data(), {static_cast<int64_t>(ids.size())}, DType::kI32, Device::kCpu);
}

// Sets ops::deterministic() for one scope.
class DeterministicMode {
 public:
  explicit DeterministicMode(bool on) : previous_(ops::deterministic()) { ops::set_deterministic(on); }
  ~DeterministicMode() { ops::set_deterministic(previous_); }
  DeterministicMode(const DeterministicMode&) = delete;
  DeterministicMode& operator=(const DeterministicMode&) = delete;

 private:
  bool previous_;
};

class CudaEmbedding : public testing::TestWithParam<Shape> {
 protected:
  const Shape& shape() const { return GetParam(); }

  // d_table after the GPU backward from `initial`, in the current deterministic mode.
  std::vector<float> cuda_backward(const std::vector<float>& initial, const std::vector<float>& d_out,
                                   const std::vector<int32_t>& ids) const {
    const Shape& s = shape();
    const PaddedOnGpu<float> d_table(initial, s.offset, DType::kF32);
    const PaddedOnGpu<uint16_t> grad(to_bf16_bits(d_out), s.offset, DType::kBF16);
    const PaddedOnGpu<int32_t> id_gpu(ids, s.offset, DType::kI32);
    ops::embedding_backward(d_table.view({s.vocab, s.channels}), grad.view({s.tokens, s.channels}),
                            id_gpu.view({s.tokens}));
    return d_table.contents();
  }
};

// The forward pass only converts table values to bf16: exactly the CPU's f32 rows, rounded to nearest even.
TEST_P(CudaEmbedding, ForwardIsTheCpuRowsRoundedToBf16) {
  std::string reason;
  if (!nanoforge::cuda::available(&reason)) GTEST_SKIP() << "no usable GPU: " << reason;
  const Shape& s = shape();
  std::mt19937 rng(21);
  std::vector<float> table = normal_values(s.vocab * s.channels, rng);
  std::vector<int32_t> ids = skewed_ids(s.tokens, s.vocab, rng);
  std::vector<float> out_cpu(static_cast<size_t>(s.tokens * s.channels));
  ops::embedding_forward(cpu_view(out_cpu, {s.tokens, s.channels}), cpu_view(table, {s.vocab, s.channels}),
                         cpu_ids(ids));

  const PaddedOnGpu<uint16_t> out(std::vector<uint16_t>(out_cpu.size(), 0), s.offset, DType::kBF16);
  const PaddedOnGpu<float> table_gpu(table, s.offset, DType::kF32);
  const PaddedOnGpu<int32_t> ids_gpu(ids, s.offset, DType::kI32);
  ops::embedding_forward(out.view({s.tokens, s.channels}), table_gpu.view({s.vocab, s.channels}),
                         ids_gpu.view({s.tokens}));
  const std::vector<uint16_t> out_gpu = out.contents();
  for (size_t i = 0; i < out_cpu.size(); ++i) {
    ASSERT_EQ(out_gpu[i], gpu_test::bf16_bits(out_cpu[i]))
        << "token " << i / s.channels << ", column " << i % s.channels;
  }
}

// Deterministic mode adds each table element's gradients in token order from its initial value, as the CPU
// does, with the same fp32 additions of the same values: the same bits, and the same bits on every run.
TEST_P(CudaEmbedding, DeterministicBackwardHasTheCpuBitsOnEveryRun) {
  std::string reason;
  if (!nanoforge::cuda::available(&reason)) GTEST_SKIP() << "no usable GPU: " << reason;
  const Shape& s = shape();
  std::mt19937 rng(22);
  const std::vector<float> initial = normal_values(s.vocab * s.channels, rng);
  std::vector<float> d_out = bf16_normal_values(s.tokens * s.channels, rng);
  std::vector<int32_t> ids = skewed_ids(s.tokens, s.vocab, rng);
  std::vector<float> d_table_cpu = initial;
  ops::embedding_backward(cpu_view(d_table_cpu, {s.vocab, s.channels}),
                          cpu_view(d_out, {s.tokens, s.channels}), cpu_ids(ids));

  const DeterministicMode deterministic(true);
  const std::vector<float> first_run = cuda_backward(initial, d_out, ids);
  for (size_t i = 0; i < first_run.size(); ++i) {
    ASSERT_EQ(std::memcmp(&first_run[i], &d_table_cpu[i], sizeof(float)), 0)
        << "row " << i / s.channels << ", column " << i % s.channels << ": " << first_run[i] << " vs CPU "
        << d_table_cpu[i];
  }
  for (int run = 1; run < 3; ++run) {
    const std::vector<float> again = cuda_backward(initial, d_out, ids);
    ASSERT_EQ(std::memcmp(again.data(), first_run.data(), again.size() * sizeof(float)), 0) << "run " << run;
  }
}

// The default backward adds with atomics in an order that can change; each element is the sum of its initial
// value and the gradients of its `count` tokens. Any order of those additions is within count * 2^-24 of the
// exact sum, relative to the sum of the magnitudes; the CPU's order too, so the two are within twice that.
// Rows no token uses keep their bits, and a row used once is one rounding on both sides: the same bits.
TEST_P(CudaEmbedding, AtomicBackwardMatchesCpu) {
  std::string reason;
  if (!nanoforge::cuda::available(&reason)) GTEST_SKIP() << "no usable GPU: " << reason;
  const Shape& s = shape();
  std::mt19937 rng(23);
  const std::vector<float> initial = normal_values(s.vocab * s.channels, rng);
  std::vector<float> d_out = bf16_normal_values(s.tokens * s.channels, rng);
  std::vector<int32_t> ids = skewed_ids(s.tokens, s.vocab, rng);
  std::vector<float> d_table_cpu = initial;
  ops::embedding_backward(cpu_view(d_table_cpu, {s.vocab, s.channels}),
                          cpu_view(d_out, {s.tokens, s.channels}), cpu_ids(ids));

  const DeterministicMode atomic(false);
  const std::vector<float> d_table_gpu = cuda_backward(initial, d_out, ids);
  std::vector<int64_t> count(static_cast<size_t>(s.vocab), 0);
  std::vector<double> magnitude(initial.size());
  for (size_t i = 0; i < initial.size(); ++i)
    magnitude[i] = std::abs(initial[i]);
  for (int64_t n = 0; n < s.tokens; ++n) {
    ++count[ids[n]];
    for (int64_t c = 0; c < s.channels; ++c)
      magnitude[ids[n] * s.channels + c] += std::abs(d_out[n * s.channels + c]);
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
  EXPECT_DEATH(ops::embedding_backward(table_bf16, rows_bf16, ids),
               "embedding_backward on CUDA: d_table must be f32");
  EXPECT_DEATH(ops::embedding_backward(table_f32, rows_f32, ids),
               "embedding_backward on CUDA: d_out must be bf16");
  const TensorView short_rows(nullptr, {3, 8}, DType::kBF16, Device::kCuda);
  EXPECT_DEATH(ops::embedding_forward(short_rows, table_f32, ids), "does not hold 4 rows of 8");
}

}  // namespace
}  // namespace nanoforge
