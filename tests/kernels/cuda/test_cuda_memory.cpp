// CUDA device memory (allocation, host copies) and the memory ops (fill, copy, accumulate, convert) against
// exact host expectations. Views start on a 16-byte boundary (the packed kernels) or one element past it (the
// scalar kernels), and sizes leave a tail after the last whole pack; the elements around each view must stay
// untouched.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

// 1 element, fewer than one pack, and many blocks' worth with a 3-element tail (1'000'003 = 8 * 125'000 + 3).
const std::vector<int64_t> kSizes = {1, 7, 1'000'003};
// Views at the start of an allocation (16-byte aligned) and one element in (not aligned for any dtype here).
// kGuardElements after each view hold random values no op may touch.
const std::vector<int64_t> kOffsets = {0, 1};

template <class HostT>
std::vector<HostT> random_host_values(int64_t count, std::mt19937& rng);

template <>
std::vector<float> random_host_values<float>(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values)
    v = normal(rng);
  return values;
}

// bf16 as its bits: random finite values.
template <>
std::vector<uint16_t> random_host_values<uint16_t>(int64_t count, std::mt19937& rng) {
  return to_bf16_bits(random_host_values<float>(count, rng));
}

template <>
std::vector<int32_t> random_host_values<int32_t>(int64_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> any_int;
  std::vector<int32_t> values(static_cast<size_t>(count));
  for (int32_t& v : values)
    v = any_int(rng);
  return values;
}

// Equal bit patterns (the ops below are exact, and -0.0 must not pass for 0.0).
template <class HostT>
void expect_same_bits(const std::vector<HostT>& actual, const std::vector<HostT>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(std::memcmp(&actual[i], &expected[i], sizeof(HostT)), 0) << "first difference at element " << i;
  }
}

TEST(CudaMemory, AllocationIsZeroedAndCopiesRoundTrip) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  const int64_t count = 1'000'003;
  DeviceBuffer buffer(Device::kCuda, count * static_cast<int64_t>(sizeof(float)));
  expect_same_bits(download<float>(buffer), std::vector<float>(count, 0.0f));

  const std::vector<float> values = random_host_values<float>(count, rng);
  cuda::copy_from_host(buffer.data(), values.data(), buffer.bytes());
  expect_same_bits(download<float>(buffer), values);
}

// fill on an (offset + size + guard) buffer of random values: the view holds `expected`, the rest is
// unchanged.
template <class HostT>
void check_fill(DType dtype, double value, HostT expected) {
  std::mt19937 rng(2);
  for (int64_t size : kSizes) {
    for (int64_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " size " << size << " offset " << offset);
      std::vector<HostT> host = random_host_values<HostT>(offset + size + kGuardElements, rng);
      const DeviceBuffer buffer = upload(host);
      ops::fill(view_of(buffer, dtype, offset, size), value);
      std::fill(host.begin() + offset, host.begin() + offset + size, expected);
      expect_same_bits(download<HostT>(buffer), host);
    }
  }
}

TEST(CudaMemory, FillWritesTheValueInEachDtype) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  check_fill<float>(DType::kF32, 1.0 / 3.0, 1.0f / 3.0f);
  check_fill<uint16_t>(DType::kBF16, 1.0 / 3.0, bf16_bits(1.0f / 3.0f));
  check_fill<int32_t>(DType::kI32, -7.0, -7);
}

// copy between two views with independent offsets; everything but the destination view is unchanged.
template <class HostT>
void check_copy(DType dtype) {
  std::mt19937 rng(3);
  for (int64_t size : kSizes) {
    for (int64_t src_offset : kOffsets) {
      for (int64_t dst_offset : kOffsets) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " size " << size << " src offset "
                                        << src_offset << " dst offset " << dst_offset);
        const std::vector<HostT> src_host =
            random_host_values<HostT>(src_offset + size + kGuardElements, rng);
        std::vector<HostT> dst_host = random_host_values<HostT>(dst_offset + size + kGuardElements, rng);
        const DeviceBuffer src = upload(src_host);
        const DeviceBuffer dst = upload(dst_host);
        ops::copy(view_of(dst, dtype, dst_offset, size), view_of(src, dtype, src_offset, size));
        std::copy(src_host.begin() + src_offset, src_host.begin() + src_offset + size,
                  dst_host.begin() + dst_offset);
        expect_same_bits(download<HostT>(dst), dst_host);
        expect_same_bits(download<HostT>(src), src_host);
      }
    }
  }
}

TEST(CudaMemory, CopyMatchesTheSourceInEachDtype) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  check_copy<float>(DType::kF32);
  check_copy<uint16_t>(DType::kBF16);
  check_copy<int32_t>(DType::kI32);
}

// into += add with independent offsets. `sum` is the exact expected element: one fp32 addition, rounded once
// to the storage type, so the comparison is bit for bit.
template <class HostT, class Sum>
void check_accumulate(DType dtype, Sum sum) {
  std::mt19937 rng(4);
  for (int64_t size : kSizes) {
    for (int64_t into_offset : kOffsets) {
      for (int64_t add_offset : kOffsets) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " size " << size << " into offset "
                                        << into_offset << " add offset " << add_offset);
        std::vector<HostT> into_host = random_host_values<HostT>(into_offset + size + kGuardElements, rng);
        const std::vector<HostT> add_host =
            random_host_values<HostT>(add_offset + size + kGuardElements, rng);
        const DeviceBuffer into = upload(into_host);
        const DeviceBuffer add = upload(add_host);
        ops::accumulate(view_of(into, dtype, into_offset, size), view_of(add, dtype, add_offset, size));
        for (int64_t i = 0; i < size; ++i)
          into_host[into_offset + i] = sum(into_host[into_offset + i], add_host[add_offset + i]);
        expect_same_bits(download<HostT>(into), into_host);
      }
    }
  }
}

TEST(CudaMemory, AccumulateAddsInFp32AndRoundsOnce) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  check_accumulate<float>(DType::kF32, [](float a, float b) { return a + b; });
  check_accumulate<uint16_t>(DType::kBF16,
                             [](uint16_t a, uint16_t b) { return bf16_bits(bf16_value(a) + bf16_value(b)); });
}

// Accumulating into itself doubles every element (into may alias add).
TEST(CudaMemory, AccumulateIntoItselfDoubles) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  const std::vector<uint16_t> host = random_host_values<uint16_t>(1'000'003, rng);
  const DeviceBuffer buffer = upload(host);
  const TensorView view = view_of(buffer, DType::kBF16, 0, static_cast<int64_t>(host.size()));
  ops::accumulate(view, view);
  std::vector<uint16_t> doubled(host.size());
  for (size_t i = 0; i < host.size(); ++i)
    doubled[i] = bf16_bits(2.0f * bf16_value(host[i]));
  expect_same_bits(download<uint16_t>(buffer), doubled);
}

// convert with independent offsets (0: packed kernel when both are, 1: one element at a time). f32 -> bf16
// must round to nearest even exactly as the host's bf16_bits does — the first two sources are ties, one
// rounding down to an even mantissa and one up — and bf16 -> f32 is exact; elements around dst stay as they
// were.
TEST(CudaMemory, ConvertRoundsF32ToBf16AndWidensBack) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  for (int64_t size : kSizes) {
    for (int64_t src_offset : kOffsets) {
      for (int64_t dst_offset : kOffsets) {
        SCOPED_TRACE(testing::Message()
                     << "size " << size << " src offset " << src_offset << " dst offset " << dst_offset);
        std::vector<float> wide = random_host_values<float>(src_offset + size + kGuardElements, rng);
        wide[src_offset] = std::bit_cast<float>(0x3F808000u);  // 1 + 2^-8: halfway, rounds down to 1
        if (size > 1) wide[src_offset + 1] = std::bit_cast<float>(0x3F818000u);  // halfway, rounds up
        std::vector<uint16_t> narrow = random_host_values<uint16_t>(dst_offset + size + kGuardElements, rng);
        const DeviceBuffer wide_gpu = upload(wide);
        const DeviceBuffer narrow_gpu = upload(narrow);
        ops::convert(view_of(narrow_gpu, DType::kBF16, dst_offset, size),
                     view_of(wide_gpu, DType::kF32, src_offset, size));
        for (int64_t i = 0; i < size; ++i)
          narrow[dst_offset + i] = bf16_bits(wide[src_offset + i]);
        expect_same_bits(download<uint16_t>(narrow_gpu), narrow);

        // And back, into the f32 buffer at its own offset.
        std::vector<float> widened = random_host_values<float>(src_offset + size + kGuardElements, rng);
        const DeviceBuffer widened_gpu = upload(widened);
        ops::convert(view_of(widened_gpu, DType::kF32, src_offset, size),
                     view_of(narrow_gpu, DType::kBF16, dst_offset, size));
        for (int64_t i = 0; i < size; ++i)
          widened[src_offset + i] = bf16_value(narrow[dst_offset + i]);
        expect_same_bits(download<float>(widened_gpu), widened);
      }
    }
  }
}

// The dtype checks run on the host before any CUDA call, so these need no GPU (and run in CI).
TEST(CudaMemoryContract, ConvertRejectsOtherDtypes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView ids(nullptr, {16}, DType::kI32, Device::kCuda);
  const TensorView narrow(nullptr, {16}, DType::kBF16, Device::kCuda);
  const TensorView wide(nullptr, {15}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(ops::convert(narrow, ids), "convert on CUDA: f32 <-> bf16 only");
  EXPECT_DEATH(ops::convert(narrow, wide), "shapes differ");
}

TEST(CudaMemoryContract, AccumulateRejectsIntegers) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView ids(nullptr, {16}, DType::kI32, Device::kCuda);
  EXPECT_DEATH(ops::accumulate(ids, ids),
               "accumulate on CUDA: into must be f32 or bf16, got i32\\[16\\] on cuda");
}

}  // namespace
}  // namespace nanoforge::gpu_test
