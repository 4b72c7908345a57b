// CUDA device memory behind DeviceBuffer: whether a GPU is usable, zeroed allocation, release,
// synchronous host<->device copies, and how much memory is free (cuda_memory.h). Allocation happens once per
// buffer when a run is planned, never inside a step, so plain cudaMalloc is enough and there is no caching
// allocator.
#include <fmt/format.h>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_memory.h"

namespace nanoforge::cuda {

bool available(std::string* reason) {
  int device_count = 0;
  const cudaError_t status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the error so that the next kernel launch check does not report it
    if (reason != nullptr) {
      *reason = fmt::format("cudaGetDeviceCount failed: {} ({} = {})", cudaGetErrorString(status),
                            cudaGetErrorName(status), static_cast<int>(status));
    }
    return false;
  }
  if (device_count == 0) {
    if (reason != nullptr) *reason = "the CUDA driver reports no GPU (check CUDA_VISIBLE_DEVICES)";
    return false;
  }
  return true;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool emulated() {
#if defined(NANOFORGE_CUDA_EMULATION)
  return true;
#else
  return false;
#endif
}

void* allocate_zeroed(int64_t bytes) {
  NANOFORGE_CHECK(bytes >= 0, "negative CUDA allocation of {} bytes", bytes);
  void* pointer = nullptr;
  const cudaError_t status = cudaMalloc(&pointer, static_cast<size_t>(bytes));
  NANOFORGE_CHECK(
      status == cudaSuccess,
      "cudaMalloc of {:.3f} GB failed: {} ({}); if the GPU is out of memory, use a smaller batch or "
      "model, or check nvidia-smi for other processes",
      bytes / 1e9, cudaGetErrorString(status), cudaGetErrorName(status));
  NANOFORGE_CUDA_CHECK(cudaMemset(pointer, 0, static_cast<size_t>(bytes)));
  return pointer;
}

void free(void* pointer) {
  NANOFORGE_CUDA_CHECK(cudaFree(pointer));
}

void copy_from_host(void* device_dst, const void* host_src, int64_t bytes) {
  NANOFORGE_CUDA_CHECK(cudaMemcpy(device_dst, host_src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
}

void copy_to_host(void* host_dst, const void* device_src, int64_t bytes) {
  NANOFORGE_CUDA_CHECK(cudaMemcpy(host_dst, device_src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
}

void synchronize() {
  NANOFORGE_CUDA_CHECK(cudaDeviceSynchronize());
}

bool device_memory_info(GpuMemoryInfo* info, std::string* reason) {
  if (!available(reason)) return false;
  int device = 0;
  NANOFORGE_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  NANOFORGE_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  size_t free_bytes = 0, total_bytes = 0;
  NANOFORGE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  int integrated = 0;
  NANOFORGE_CUDA_CHECK(cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, device));
  info->name = properties.name;
  info->free_bytes = static_cast<int64_t>(free_bytes);
  info->total_bytes = static_cast<int64_t>(total_bytes);
  info->integrated = integrated != 0;
  return true;
}

bool device_compute_capability(int* major, int* minor, std::string* reason) {
  if (!available(reason)) return false;
  int device = 0;
  NANOFORGE_CUDA_CHECK(cudaGetDevice(&device));
  NANOFORGE_CUDA_CHECK(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device));
  NANOFORGE_CUDA_CHECK(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device));
  return true;
}

}  // namespace nanoforge::cuda
