// CUDA device memory for DeviceBuffer and host<->device copies, and the device queries behind
// kernels/device.h. Implemented by kernels/cuda/memory.cu when the CUDA backend is built, and by
// kernels/cuda_unavailable.cpp (which explains how to get it) otherwise.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/device.h"

namespace nanoforge::cuda {

// Whether this build has the CUDA backend and the process can see at least one GPU. `reason` says why not.
bool available(std::string* reason = nullptr);
// How many GPUs the process sees (0 without the CUDA backend).
int device_count();
// Whether the GPUs are the CPU emulator of CUDA (emulator/): tests use it to pick shapes and to
// ask the emulator for what they need (NANOFORGE_EMULATOR=devices=2 for two ranks).
bool emulated();

void* allocate_zeroed(int64_t bytes);
void free(void* pointer);
void copy_from_host(void* device_dst, const void* host_src, int64_t bytes);
void copy_to_host(void* host_dst, const void* device_src, int64_t bytes);
// Waits for all work queued on the device (for timing and before reading results on the host).
void synchronize();

// The current GPU's name and memory (kernels/device.h's GpuMemoryInfo), or false, saying why, when no GPU
// is usable.
bool device_memory_info(GpuMemoryInfo* info, std::string* reason = nullptr);

// The current GPU's compute capability (9.0 for an H100/H200, 12.1 for a GB10), or false, saying why, when
// no GPU is usable.
bool device_compute_capability(int* major, int* minor, std::string* reason = nullptr);

}  // namespace nanoforge::cuda
