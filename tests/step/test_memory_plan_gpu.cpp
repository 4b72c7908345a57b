// The memory plan's GPU branch on both kinds of GPU (step/memory_plan.cpp, available_memory): a discrete
// GPU (the emulator's H200 profile) offers what cudaMemGetInfo reports free; a GPU integrated with the host
// (cudaDevAttrIntegrated, the GB10 profile: arch=sm_121) shares the host's memory, so the plan reads
// MemAvailable and counts the checkpoint snapshot against the same memory.
#include <gtest/gtest.h>

#include "emulator/emulator.h"
#include "step/memory_plan.h"

namespace nanoforge {
namespace {

TEST(Device, IntegratedMemoryDetected) {
  const std::string saved = emulator::settings().architecture;
  emulator::settings().architecture = "sm_90";
  absl::StatusOr<AvailableMemory> discrete = available_memory(Device::kCuda);
  emulator::settings().architecture = "sm_121";
  absl::StatusOr<AvailableMemory> integrated = available_memory(Device::kCuda);
  emulator::settings().architecture = saved;

  ASSERT_TRUE(discrete.ok()) << discrete.status();
  EXPECT_FALSE(discrete->shared_with_host);
  EXPECT_NE(discrete->source.find("cudaMemGetInfo"), std::string::npos) << discrete->source;
  EXPECT_NE(discrete->source.find("H200"), std::string::npos) << discrete->source;

  ASSERT_TRUE(integrated.ok()) << integrated.status();
  EXPECT_TRUE(integrated->shared_with_host);
  EXPECT_NE(integrated->source.find("shares the host's memory"), std::string::npos) << integrated->source;
  EXPECT_NE(integrated->source.find("GB10"), std::string::npos) << integrated->source;
  EXPECT_GT(integrated->bytes, 0);
}

}  // namespace
}  // namespace nanoforge
