// kernels/device.h over the CUDA backend (kernels/cuda/memory.cu, real or emulated), or over
// kernels/cuda_unavailable.cpp, which answers "not built" when the build has no CUDA backend.
#include "kernels/device.h"

#include <fmt/format.h>

#include "kernels/cuda/cuda_memory.h"

namespace nanoforge {

bool gpu_available(std::string* reason) {
  return cuda::available(reason);
}

bool gpu_emulated() {
  return cuda::emulated();
}

bool gpu_memory_info(GpuMemoryInfo* info, std::string* reason) {
  return cuda::device_memory_info(info, reason);
}

bool gpu_compute_capability(int* major, int* minor, std::string* reason) {
  return cuda::device_compute_capability(major, minor, reason);
}

absl::StatusOr<std::string> device_display_name(Device device) {
  if (device == Device::kCpu) return std::string("cpu");
  GpuMemoryInfo gpu;
  std::string reason;
  if (!gpu_memory_info(&gpu, &reason)) {
    return absl::FailedPreconditionError(fmt::format("the GPU is not usable: {}", reason));
  }
  return gpu.name;
}

void synchronize(Device device) {
  if (device == Device::kCuda) cuda::synchronize();
}

}  // namespace nanoforge
