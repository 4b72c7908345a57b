// What the rooms above kernels/ may ask of the GPU: whether one is usable, whether it is the CPU emulator
// of CUDA, its name and memory, its compute capability, and waiting for its queued work. The CUDA backend
// (kernels/cuda/) stays private to kernels/; without it every question answers "no GPU" with the reason.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "kernels/tensor.h"

namespace nanoforge {

// Whether this build has the CUDA backend and the process sees at least one GPU (counted without creating
// a context). `reason` says why not.
bool gpu_available(std::string* reason = nullptr);
// Whether the GPUs are the CPU emulator of CUDA (emulator/; nanoforge-emulated and the tests).
bool gpu_emulated();

// The current GPU's name, its free and total bytes as cudaMemGetInfo reports them, and whether it is
// integrated with the host and shares its memory (e.g. a GB10), where the host's own accounting
// (/proc/meminfo) says better what is free.
struct GpuMemoryInfo {
  std::string name;
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
  bool integrated = false;
};
// False, saying why, when no GPU is usable.
bool gpu_memory_info(GpuMemoryInfo* info, std::string* reason = nullptr);

// The current GPU's compute capability (9.0 for an H100/H200, 12.1 for a GB10), or false, saying why, when
// no GPU is usable.
bool gpu_compute_capability(int* major, int* minor, std::string* reason = nullptr);

// The device's name for tables and MFU: "cpu", or the GPU's name (an error saying why when it is unusable).
absl::StatusOr<std::string> device_display_name(Device device);

// Waits for all work queued on `device` (for timing); the CPU runs its ops synchronously.
void synchronize(Device device);

}  // namespace nanoforge
