// Checks for the CUDA backend, reported through NANOFORGE_CHECK (file:line, then a message for people): the
// result of a CUDA runtime call, the launch of a kernel, and the device and dtype of an op's tensor. Host
// code only; kernels launch asynchronously, so a fault inside one surfaces at the next synchronising call.
#pragma once

#include <cuda_runtime.h>

#include "kernels/tensor.h"
#include "support/check.h"

// NANOFORGE_CUDA_CHECK(cudaMemcpy(...)): aborts with the call, the CUDA error's name and description.
#define NANOFORGE_CUDA_CHECK(call)                                                                       \
  do {                                                                                                   \
    const cudaError_t nanoforge_cuda_status = (call);                                                    \
    NANOFORGE_CHECK(nanoforge_cuda_status == cudaSuccess, "{} failed: {} ({})", #call,                   \
                    cudaGetErrorString(nanoforge_cuda_status), cudaGetErrorName(nanoforge_cuda_status)); \
  } while (false)

// NANOFORGE_CUDA_CHECK_LAUNCH("rmsnorm_forward"): right after a <<<...>>> launch, aborts if the launch was
// refused (bad configuration, no kernel image for this GPU's architecture).
#define NANOFORGE_CUDA_CHECK_LAUNCH(kernel_name)                                                     \
  do {                                                                                               \
    const cudaError_t nanoforge_cuda_status = cudaGetLastError();                                    \
    NANOFORGE_CHECK(nanoforge_cuda_status == cudaSuccess, "launching the {} kernel failed: {} ({})", \
                    kernel_name, cudaGetErrorString(nanoforge_cuda_status),                          \
                    cudaGetErrorName(nanoforge_cuda_status));                                        \
  } while (false)

namespace nanoforge::cuda {

// Aborts unless tensor `name` of `op` lives on the GPU.
inline void check_on_gpu(const TensorView& t, const char* op, const char* name) {
  NANOFORGE_CHECK(t.device == Device::kCuda, "{} on CUDA: {} must be a CUDA tensor, got {}", op, name,
                  t.describe());
}

// Aborts unless tensor `name` of `op` lives on the GPU with element type `dtype`.
inline void check_tensor(const TensorView& t, DType dtype, const char* op, const char* name) {
  check_on_gpu(t, op, name);
  NANOFORGE_CHECK(t.dtype == dtype, "{} on CUDA: {} must be {}, got {}", op, name, dtype_name(dtype),
                  t.describe());
}

}  // namespace nanoforge::cuda
