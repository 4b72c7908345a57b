// CUDA device memory for DeviceBuffer and host<->device copies. Implemented by kernels/cuda/memory.cu when
// the CUDA backend is built, and by kernels/cuda_unavailable.cpp (which explains how to get it) otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace nanoforge::cuda {

// Whether this build has the CUDA backend and the process can see at least one GPU. `reason` says why not.
bool available(std::string* reason = nullptr);

void* allocate_zeroed(int64_t bytes);
void free(void* pointer);
void copy_from_host(void* device_dst, const void* host_src, int64_t bytes);
void copy_to_host(void* host_dst, const void* device_src, int64_t bytes);
// Waits for all work queued on the device (for timing and before reading results on the host).
void synchronize();

}  // namespace nanoforge::cuda
