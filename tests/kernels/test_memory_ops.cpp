// fill, copy and accumulate: each element is one store or one correctly rounded add, so every result is
// compared exactly; plus the contract checks on shapes and dtypes.
#include <cmath>

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
