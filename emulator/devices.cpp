// The emulated GPUs and the runtime's error state (runtime.h). Two profiles, the GPUs nanoforge is built for:
// sm_90 (H200: 132 SMs, 227 KB of shared memory per block with the opt-in) and sm_121 (GB10: 48 SMs, 99 KB,
// integrated with the host's memory). Every emulated device of a process has the profile that
// NANOFORGE_EMULATOR's arch= names; their memory is the host's, so that is what they report having.
#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "emulator/emulator.h"
#include "emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kGiB = kKiB * kKiB * kKiB;

// From NVIDIA's tables of compute capabilities: shared memory per block with the opt-in is 227 KB on sm_90
// and 99 KB on sm_12x; every architecture allows 48 KB without it.
constexpr DeviceProfile kH200{"sm_90",    "NVIDIA H200 (nanoforge CUDA emulator)",
                              9,          0,
                              132,        48 * kKiB,
                              227 * kKiB, 228 * kKiB,
                              141 * kGiB, false,
                              50 << 20};
constexpr DeviceProfile kGB10{"sm_121",   "NVIDIA GB10 (nanoforge CUDA emulator)",
                              12,         1,
                              48,         48 * kKiB,
                              99 * kKiB,  100 * kKiB,
                              128 * kGiB, true,
                              24 << 20};

struct StickyError {
  cudaError_t error = cudaSuccess;
};

StickyError& sticky() {
  static StickyError* instance = new StickyError();
  return *instance;
}

}  // namespace

std::mutex& runtime_mutex() {
  static std::mutex* instance = new std::mutex();  // never destroyed: queued work may run at exit
  return *instance;
}

const DeviceProfile& device_profile() {
  return settings().architecture == "sm_121" ? kGB10 : kH200;
}

int device_count() {
  return settings().device_count;
}

int& current_device() {
  thread_local int device = 0;
  return device;
}

bool valid_device(int device) {
  return device >= 0 && device < device_count();
}

cudaError_t& last_error() {
  thread_local cudaError_t error = cudaSuccess;
  return error;
}

cudaError_t sticky_error() {
  return sticky().error;
}

void set_sticky_error(cudaError_t error, const std::string& message) {
  if (sticky().error == cudaSuccess) sticky().error = error;
  std::fprintf(stderr, "nanoforge CUDA emulator: %s; the device is now unusable (%s)\n", message.c_str(),
               cudaGetErrorName(error));
  std::fflush(stderr);
}

cudaError_t fail(cudaError_t error, const std::string& explanation) {
  last_error() = error;
  std::fprintf(stderr, "nanoforge CUDA emulator: %s (%s)\n", explanation.c_str(), cudaGetErrorName(error));
  std::fflush(stderr);
  return error;
}

}  // namespace nanoforge::emulator
