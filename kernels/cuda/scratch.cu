// The grow-only scratch buffers of scratch.h.
#include <mutex>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/scratch.h"

namespace nanoforge::cuda {
namespace {

struct Scratch {
  std::mutex mutex;
  void* device = nullptr;
  int64_t device_bytes = 0;
  void* host = nullptr;
  int64_t host_bytes = 0;
};

Scratch& scratch() {
  static Scratch* instance = new Scratch();  // never destroyed: kernels may run until process exit
  return *instance;
}

// Rounds up to a power of two so that a few growing requests settle quickly.
int64_t grown_size(int64_t bytes) {
  int64_t size = 4096;
  while (size < bytes)
    size *= 2;
  return size;
}

}  // namespace

void* device_scratch(int64_t bytes) {
  Scratch& s = scratch();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (bytes > s.device_bytes) {
    if (s.device != nullptr) NANOFORGE_CUDA_CHECK(cudaFree(s.device));  // cudaFree waits for the device
    s.device_bytes = grown_size(bytes);
    NANOFORGE_CUDA_CHECK(cudaMalloc(&s.device, static_cast<size_t>(s.device_bytes)));
  }
  return s.device;
}

void* host_scratch(int64_t bytes) {
  Scratch& s = scratch();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (bytes > s.host_bytes) {
    if (s.host != nullptr) {
      NANOFORGE_CUDA_CHECK(cudaDeviceSynchronize());
      NANOFORGE_CUDA_CHECK(cudaFreeHost(s.host));
    }
    s.host_bytes = grown_size(bytes);
    NANOFORGE_CUDA_CHECK(cudaMallocHost(&s.host, static_cast<size_t>(s.host_bytes)));
  }
  return s.host;
}

}  // namespace nanoforge::cuda
