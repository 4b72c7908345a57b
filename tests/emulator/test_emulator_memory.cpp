// The emulator's memory and launch checks: cudaMalloc gives 256-byte aligned memory full of NaN bytes,
// dynamic shared memory starts as NaN, more than 48 KB of it needs the opt-in and no block gets more than its
// architecture allows (227 KB on sm_90, 99 KB on sm_121), blocks and grids keep CUDA's limits, a kernel given
// host memory stops the program, copies check their direction and bounds, and the devices report their
// profiles. Under AddressSanitizer a kernel writing one element past its allocation is caught.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/emulator/emulator_test_kernels.h"
#include "tests/emulator/emulator_test_support.h"

namespace nanoforge::emulator_test {
namespace {

constexpr size_t kKiB = 1024;

TEST(EmulatorMemory, AllocationsAreAlignedAndStartAsNaN) {
  DeviceArray<float> memory(13);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory.get()) % 256, 0u);
  for (const float value : memory.download())
    EXPECT_EQ(bits_of(value), 0xFFFFFFFFu);
}

TEST(EmulatorMemory, DynamicSharedMemoryStartsAsNaN) {
  DeviceArray<float> out(300);
  read_fresh_shared_memory(out.get(), 300);
  for (const float value : out.download())
    EXPECT_EQ(bits_of(value), 0xFFFFFFFFu);
}

TEST(EmulatorMemory, SharedMemoryAbove48KiBNeedsTheOptIn) {
  ScopedSettings s;
  s->architecture = "sm_90";
  DeviceArray<int> out(1);
  cudaGetLastError();
  use_shared_memory(out.get(), 48 * kKiB);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  use_shared_memory(out.get(), 64 * kKiB);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(allow_shared_memory(static_cast<int>(64 * kKiB)), cudaSuccess);
  use_shared_memory(out.get(), 64 * kKiB);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download()[0], 42);
}

TEST(EmulatorMemory, EachArchitectureHasItsSharedMemoryLimit) {
  ScopedSettings s;
  DeviceArray<int> out(1);
  cudaGetLastError();
  s->architecture = "sm_121";  // GB10: 99 KB per block
  EXPECT_EQ(allow_shared_memory(static_cast<int>(100 * kKiB)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // a refused call is also the last error, as in CUDA
  ASSERT_EQ(allow_shared_memory(static_cast<int>(99 * kKiB)), cudaSuccess);
  use_shared_memory(out.get(), 99 * kKiB);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  use_shared_memory(out.get(), 100 * kKiB);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  s->architecture = "sm_90";  // H200: 227 KB per block
  EXPECT_EQ(allow_shared_memory(static_cast<int>(228 * kKiB)), cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(allow_shared_memory(static_cast<int>(227 * kKiB)), cudaSuccess);
  use_shared_memory(out.get(), 227 * kKiB);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download()[0], 42);
}

TEST(EmulatorMemory, BlocksAndGridsKeepCudasLimits) {
  DeviceArray<uint32_t> marks(2048);
  marks.zero();
  cudaGetLastError();
  record_indices(marks.get(), dim3(1), dim3(32, 32, 1));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  record_indices(marks.get(), dim3(1), dim3(1025));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  record_indices(marks.get(), dim3(1), dim3(1, 1, 65));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  record_indices(marks.get(), dim3(1, 65536), dim3(1));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  record_indices(marks.get(), dim3(0), dim3(32));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

TEST(EmulatorMemoryDeathTest, AKernelGivenHostMemoryStopsTheProgram) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<uint32_t> host(64);
  EXPECT_DEATH(record_indices(host.data(), dim3(1), dim3(64)),
               "kernel record_indices_kernel .*argument 0 is .*, which is not GPU memory");
}

TEST(EmulatorMemory, CopiesCheckTheirDirectionAndBounds) {
  DeviceArray<float> device(16);
  std::vector<float> host(32);
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), device.get(), 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device.get() + 4, host.data(), 48, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), device.get(), 64, cudaMemcpyDefault), cudaSuccess);
  cudaGetLastError();
}

TEST(EmulatorDevices, DevicesReportTheirProfile) {
  ScopedSettings s;
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  cudaDeviceProp properties{};
  s->architecture = "sm_121";
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  EXPECT_NE(std::string(properties.name).find("GB10"), std::string::npos);
  EXPECT_EQ(properties.major * 10 + properties.minor, 121);
  EXPECT_EQ(properties.sharedMemPerBlockOptin, 99 * kKiB);
  EXPECT_EQ(properties.integrated, 1);
  s->architecture = "sm_90";
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  EXPECT_NE(std::string(properties.name).find("H200"), std::string::npos);
  EXPECT_EQ(properties.major * 10 + properties.minor, 90);
  EXPECT_EQ(properties.sharedMemPerBlockOptin, 227 * kKiB);
  EXPECT_EQ(properties.integrated, 0);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  cudaGetLastError();
}

TEST(EmulatorDevicesDeathTest, AKernelGivenAnotherGpusMemoryStopsTheProgram) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        emulator::settings().device_count = 2;
        cudaSetDevice(1);
        uint32_t* other = nullptr;
        cudaMalloc(&other, 256);
        cudaSetDevice(0);
        record_indices(other, dim3(1), dim3(64));
      },
      "argument 0 .* is memory of GPU 1, but the kernel runs on GPU 0");
}

#if defined(__SANITIZE_ADDRESS__)
TEST(EmulatorMemoryDeathTest, AddressSanitizerSeesAWriteOnePastTheAllocation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DeviceArray<uint32_t> marks(63);  // one short of the 64 threads' marks
        record_indices(marks.get(), dim3(1), dim3(64));
        cudaDeviceSynchronize();
      },
      "heap-buffer-overflow");
}
#endif

}  // namespace
}  // namespace nanoforge::emulator_test
