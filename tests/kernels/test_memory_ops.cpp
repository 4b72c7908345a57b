// fill, copy, accumulate and convert: each element is one store, one correctly rounded add or one rounding,
// so every result is compared exactly; plus the contract checks on shapes and dtypes.
#include <cmath>

#include "kernels/device_buffer.h"
#include "kernels/host_transfer.h"
#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

template <class T>
void check_fill(double value) {
  HostTensor<T> t({3, 5, 7}, T{11});
  ops::fill(t.view(), value);
  for (T x : t.data)
    ASSERT_EQ(x, static_cast<T>(value));
}

TEST(Fill, WritesEveryElementF64) {
  check_fill<double>(-0.3125);
}
TEST(Fill, WritesEveryElementF32) {
  check_fill<float>(2.0 / 3.0);
}
TEST(Fill, WritesEveryElementI32) {
  check_fill<int32_t>(-1);
}

template <class T>
void check_copy() {
  HostTensor<T> src = random_tensor<double>({4, 33}, 1, -100, 100).template cast<T>();
  HostTensor<T> dst({4, 33}, T{7});
  ops::copy(dst.view(), src.view());
  EXPECT_TRUE(bitwise_equal(dst, src));
  // Copying a tensor onto itself leaves it as it was.
  ops::copy(src.view(), src.view());
  EXPECT_TRUE(bitwise_equal(dst, src));
}

TEST(Copy, CopiesBytesF64) {
  check_copy<double>();
}
TEST(Copy, CopiesBytesF32) {
  check_copy<float>();
}
TEST(Copy, CopiesBytesI32) {
  check_copy<int32_t>();
}

template <class T>
void check_accumulate() {
  HostTensor<T> into = random_tensor<T>({5, 6, 7}, 2);
  const HostTensor<T> before = into;
  HostTensor<T> add = random_tensor<T>({5, 6, 7}, 3);
  ops::accumulate(into.view(), add.view());
  // For f64 this is the f64 add itself; for f32 the double sum of two floats is exact, so rounding it to
  // float gives the correctly rounded f32 sum.
  std::vector<double> expected(into.data.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] = static_cast<T>(double(before.data[i]) + double(add.data[i]));
  }
  EXPECT_TRUE(all_close(into, expected, 0));  // one correctly rounded add per element: exact
}

TEST(Accumulate, AddsElementwiseF64) {
  check_accumulate<double>();
}
TEST(Accumulate, AddsElementwiseF32) {
  check_accumulate<float>();
}

// convert: f64 -> f32 is static_cast's round to nearest (checked against it element by element, on values
// that are not f32-representable, so a truncating conversion would differ); f32 -> f64 is exact.
TEST(Convert, RoundsF64ToF32AndWidensBack) {
  HostTensor<double> wide = random_tensor<double>({7, 13}, 4, -100, 100);
  HostTensor<float> narrow({7, 13}, 3.0f);
  ops::convert(narrow.view(), wide.view());
  int inexact = 0;
  for (int64_t i = 0; i < wide.numel(); ++i) {
    ASSERT_EQ(narrow[i], static_cast<float>(wide[i])) << "element " << i;
    inexact += static_cast<double>(narrow[i]) != wide[i];
  }
  EXPECT_GT(inexact, wide.numel() / 2);  // the inputs really needed rounding
  HostTensor<double> back({7, 13}, 5.0);
  ops::convert(back.view(), narrow.view());
  for (int64_t i = 0; i < wide.numel(); ++i)
    ASSERT_EQ(back[i], static_cast<double>(narrow[i])) << "element " << i;
}

TEST(Convert, SameDtypeCopies) {
  HostTensor<float> src = random_tensor<float>({3, 9}, 6);
  HostTensor<float> dst({3, 9});
  ops::convert(dst.view(), src.view());
  EXPECT_TRUE(bitwise_equal(dst, src));
}

// Host conversions to and from bf16 (GPU activations and logits read back for sampling and tests): round to
// nearest, ties to even, exactly as the GPU's __float2bfloat16_rn; bf16 has 8 significant bits, so values
// between 1 and 2 step by 2^-7.
TEST(HostTransfer, Bf16RoundsToNearestEven) {
  const std::vector<float> values = {
      1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-7f + 0x1p-9f, -2.5f, 0.0f};
  const std::vector<float> rounded = {1.0f, 1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -2.5f, 0.0f};
  DeviceBuffer buffer(Device::kCpu, static_cast<int64_t>(values.size() * 2));
  const TensorView view(buffer.data(), {static_cast<int64_t>(values.size())}, DType::kBF16, Device::kCpu);
  upload(view, values.data());
  EXPECT_EQ(download<float>(view), rounded);
  EXPECT_EQ(static_cast<const uint16_t*>(buffer.data())[0], 0x3F80);  // 1.0: fp32 0x3F800000's upper half
  EXPECT_EQ(download<double>(view)[4], -2.5);
}

TEST(MemoryContracts, ConvertRejectsMismatchedShapesAndUnsupportedDtypes) {
  use_threadsafe_death_tests();
  HostTensor<double> a({2, 3});
  HostTensor<float> b({3, 2});
  HostTensor<int32_t> ids({2, 3});
  EXPECT_DEATH(ops::convert(a.view(), b.view()), "shapes differ");
  EXPECT_DEATH(ops::convert(ids.view(), a.view()), "f32 <-> f64 only");
}

TEST(MemoryContracts, CopyRejectsMismatchedShapesAndDtypes) {
  use_threadsafe_death_tests();
  HostTensor<double> a({2, 3}), b({3, 2});
  HostTensor<float> c({2, 3});
  EXPECT_DEATH(ops::copy(a.view(), b.view()), "shapes differ");
  EXPECT_DEATH(ops::copy(a.view(), c.view()), "dtypes differ");
}

TEST(MemoryContracts, AccumulateRejectsMismatchedShapesAndDtypes) {
  use_threadsafe_death_tests();
  HostTensor<double> a({2, 3}), b({6});
  HostTensor<float> c({2, 3});
  EXPECT_DEATH(ops::accumulate(a.view(), b.view()), "shapes differ");
  EXPECT_DEATH(ops::accumulate(a.view(), c.view()), "share a float dtype");
}

}  // namespace
}  // namespace nanoforge::test
