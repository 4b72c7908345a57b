// The emulator's cp.async: a copy lands only at the wait_group that releases its group (never before, so a
// read before the wait sees the old bytes), wait_group N leaves the N newest groups in flight, a source size
// of 0 zero-fills, and a thread that reads another thread's copy without a barrier after that thread's wait
// is a race the schedules expose.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/emulator/emulator_test_kernels.h"
#include "tests/emulator/emulator_test_support.h"

namespace nanoforge::emulator_test {
namespace {

std::vector<float> numbered(int count) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i)
    values[static_cast<size_t>(i)] = static_cast<float>(i) + 0.25f;
  return values;
}

TEST(EmulatorAsyncCopy, ACopyLandsOnlyAtTheWaitThatReleasesItsGroup) {
  ScopedSettings s;
  s->schedule_mode = emulator::ScheduleMode::kCompare;
  DeviceArray<float> source(512), out(64 * 16);
  source.upload(numbered(512));
  async_copy_stages(out.get(), source.get());
  const std::vector<float> got = out.download();
  for (int i = 0; i < 64; ++i) {
    for (int e = 0; e < 4; ++e) {
      const float* record = &got[static_cast<size_t>(i * 16 + e)];
      const float group0 = static_cast<float>(4 * i + e) + 0.25f;
      const float group1 = i % 2 == 0 ? static_cast<float>(256 + 4 * i + e) + 0.25f : 0.0f;
      // Shared memory starts as 0xFF bytes (NaN): nothing has landed before the first wait.
      EXPECT_TRUE(std::isnan(record[0])) << "thread " << i << " saw its copy before any wait";
      EXPECT_EQ(record[4], group0) << "thread " << i << ": wait_group 1 must land the older group";
      EXPECT_TRUE(std::isnan(record[8])) << "thread " << i << ": wait_group 1 must leave the newest group";
      EXPECT_EQ(record[12], group1) << "thread " << i << ": wait_group 0 lands everything (odd: zero-filled)";
    }
  }
}

TEST(EmulatorAsyncCopy, AWaitThenABarrierPublishesTheCopyToEveryThread) {
  ScopedSettings s;
  s->schedule_mode = emulator::ScheduleMode::kCompare;
  DeviceArray<float> source(256), out(256);
  source.upload(numbered(256));
  async_copy_exchange(out.get(), source.get(), /*synchronized=*/true);
  const std::vector<float> got = out.download();
  for (int i = 0; i < 64; ++i) {
    for (int e = 0; e < 4; ++e)
      EXPECT_EQ(got[static_cast<size_t>(4 * i + e)], static_cast<float>(4 * ((i + 32) % 64) + e) + 0.25f);
  }
}

TEST(EmulatorAsyncCopyDeathTest, ReadingAnotherThreadsCopyWithoutABarrierChangesTheBits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        emulator::settings().schedule_mode = emulator::ScheduleMode::kCompare;
        DeviceArray<float> source(256);
        DeviceArray<float> out(256);
        source.upload(numbered(256));
        async_copy_exchange(out.get(), source.get(), /*synchronized=*/false);
        cudaDeviceSynchronize();
      },
      "kernel async_copy_exchange_kernel<false> .* gives different bits");
}

}  // namespace
}  // namespace nanoforge::emulator_test
