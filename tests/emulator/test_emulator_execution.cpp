// The emulator's execution model: every thread of every block runs once under every schedule; warp intrinsics
// return what CUDA specifies; a race between warps (no __syncthreads) or lanes (no __syncwarp) gives
// different bits under different schedules, which the compare mode reports; a deadlock, divergent
// warp-synchronous calls and a barrier after threads exited stop the program naming the kernel, block and
// threads; __trap fails the launch and every call after it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "tests/emulator/emulator_test_kernels.h"
#include "tests/emulator/emulator_test_support.h"

namespace nanoforge::emulator_test {
namespace {

using emulator::Schedule;
using emulator::ScheduleMode;

TEST(EmulatorExecution, EveryThreadOfEveryBlockRunsOnceUnderEverySchedule) {
  ScopedSettings s;
  const dim3 grid(3, 2, 2), block(8, 4, 2);  // two warps per block
  const int blocks = 12, threads = 64;
  for (int schedule = 0; schedule <= emulator::kScheduleCount; ++schedule) {
    SCOPED_TRACE(schedule);
    if (schedule == emulator::kScheduleCount) {
      s->schedule_mode = ScheduleMode::kCompare;
    } else {
      s->schedule_mode = ScheduleMode::kFixed;
      s->fixed_schedule = static_cast<Schedule>(schedule);
    }
    DeviceArray<uint32_t> marks(blocks * threads);
    marks.zero();
    record_indices(marks.get(), grid, block);
    const std::vector<uint32_t> got = marks.download();
    for (int b = 0; b < blocks; ++b) {
      for (int t = 0; t < threads; ++t)
        ASSERT_EQ(got[b * threads + t], static_cast<uint32_t>(b * 4096 + t + 1))
            << "block " << b << " thread " << t;
    }
  }
}

TEST(EmulatorExecution, WarpIntrinsicsFollowCuda) {
  DeviceArray<int> out(128);
  DeviceArray<unsigned> ballots(96);
  warp_intrinsics(out.get(), ballots.get());
  const std::vector<int> got = out.download();
  const std::vector<unsigned> votes = ballots.download();
  unsigned every_third = 0;
  for (int lane = 0; lane < 32; lane += 3)
    every_third |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    SCOPED_TRACE(lane);
    EXPECT_EQ(got[4 * lane + 0], 30);
    EXPECT_EQ(got[4 * lane + 1], lane % 8 >= 1 ? 10 * (lane - 1) : 10 * lane);  // up within segments of 8
    EXPECT_EQ(got[4 * lane + 2], lane % 16 + 2 < 16 ? 10 * (lane + 2) : 10 * lane);
    EXPECT_EQ(got[4 * lane + 3], 10 * (lane ^ 5));
    EXPECT_EQ(votes[lane], every_third);
    EXPECT_EQ(votes[32 + lane], 1u);
    EXPECT_EQ(votes[64 + lane], 1u);
  }
}

TEST(EmulatorExecution, SynchronisedExchangesGiveTheSameBitsUnderEverySchedule) {
  ScopedSettings s;
  s->schedule_mode = ScheduleMode::kCompare;
  DeviceArray<float> warps(4 * 128), lanes(32);
  exchange_between_warps(warps.get(), 4, 128, /*synchronized=*/true);
  exchange_between_lanes(lanes.get(), /*synchronized=*/true);
  const std::vector<float> got = warps.download(), got_lanes = lanes.download();
  for (int b = 0; b < 4; ++b) {
    for (int t = 0; t < 128; ++t)
      EXPECT_EQ(got[b * 128 + t], 100.0f * b + (t / 32 + 1) % 4);
  }
  for (int lane = 0; lane < 32; ++lane)
    EXPECT_EQ(got_lanes[lane], (lane + 1) % 32 + 0.5f);
}

TEST(EmulatorExecutionDeathTest, AMissingSyncthreadsChangesTheBitsBetweenSchedules) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        emulator::settings().schedule_mode = ScheduleMode::kCompare;
        DeviceArray<float> out(4 * 128);
        exchange_between_warps(out.get(), 4, 128, /*synchronized=*/false);
        cudaDeviceSynchronize();
      },
      "kernel exchange_between_warps_kernel<false> .* gives different bits under the in-order and .* "
      "schedules");
}

TEST(EmulatorExecutionDeathTest, AMissingSyncwarpChangesTheBitsBetweenSchedules) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        emulator::settings().schedule_mode = ScheduleMode::kCompare;
        DeviceArray<float> out(32);
        exchange_between_lanes(out.get(), /*synchronized=*/false);
        cudaDeviceSynchronize();
      },
      "kernel exchange_between_lanes_kernel<false> .* gives different bits");
}

TEST(EmulatorExecutionDeathTest, ADeadlockNamesTheKernelBlockAndEveryThreadsPlace) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        deadlock(64);
        cudaDeviceSynchronize();
      },
      "deadlock in kernel deadlock_kernel .*block \\(0, 0, 0\\).*threads 0-15: wait at __syncwarp with mask "
      "0xffffffff at .*emulator_test_kernels.cu:[0-9]+.*threads 16-31: wait at __syncthreads\\(\\)");
}

TEST(EmulatorExecutionDeathTest, LanesAtDifferentWarpCallsAreReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        divergent_warp_calls();
        cudaDeviceSynchronize();
      },
      "kernel divergent_warp_calls_kernel .*divergent warp-synchronous calls: lane [0-9]+ calls "
      "(__syncwarp|__shfl_xor_sync)");
}

TEST(EmulatorExecutionDeathTest, ABarrierAfterThreadsExitedIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        barrier_after_exit(64);
        cudaDeviceSynchronize();
      },
      "kernel barrier_after_exit_kernel .*(exited|exits).*__syncthreads");
}

TEST(EmulatorExecutionDeathTest, TrapFailsTheLaunchAndEveryCallAfterIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        trap(3);
        const bool launch_failed = cudaDeviceSynchronize() == cudaErrorLaunchFailure;
        void* memory = nullptr;
        const bool sticky = cudaMalloc(&memory, 16) == cudaErrorLaunchFailure;
        std::exit(launch_failed && sticky ? 0 : 1);
      },
      testing::ExitedWithCode(0),
      "__trap\\(\\) in kernel trap_kernel .*block \\(1, 0, 0\\), thread \\(5, 0, 0\\)");
}

}  // namespace
}  // namespace nanoforge::emulator_test
