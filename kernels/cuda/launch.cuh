// How kernels/cuda launches a kernel and declares dynamic shared memory, written once for both builds: under
// nvcc `launch_kernel<kernel>(grid, block, shared_bytes, stream)(arguments...)` is kernel<<<grid, block,
// shared_bytes, stream>>>(arguments...) and NANOFORGE_DYNAMIC_SHARED is an extern __shared__ array; in the
// emulation build (the same .cu compiled as C++, emulator/) they go to the CPU emulator of CUDA.
// A kernel whose template arguments are deduced from its call arguments must name them here:
// launch_kernel<kernel<T>>.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#if defined(NANOFORGE_CUDA_EMULATION)
#include <source_location>

#include "emulator/execution.h"
#include "emulator/launch.h"
#endif

// NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128): the block's dynamic shared memory as `shared`, an
// array of unsigned char aligned to 128 bytes; its size is the launch's shared_bytes.
#if defined(NANOFORGE_CUDA_EMULATION)
#define NANOFORGE_DYNAMIC_SHARED(type, name, alignment) \
  type* const name = static_cast<type*>(::nanoforge::emulator::dynamic_shared_memory())
#else
#define NANOFORGE_DYNAMIC_SHARED(type, name, alignment) \
  extern __shared__ __align__(alignment)                \
  type name[]
#endif

namespace nanoforge::cuda {

template <auto kKernel>
class KernelLaunch {
 public:
#if defined(NANOFORGE_CUDA_EMULATION)
  KernelLaunch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, std::source_location site)
      : grid_(grid), block_(block), shared_bytes_(shared_bytes), stream_(stream), site_(site) {}
#else
  KernelLaunch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream)
      : grid_(grid), block_(block), shared_bytes_(shared_bytes), stream_(stream) {}
#endif

  template <class... Arguments>
  void operator()(Arguments&&... arguments) const {
#if defined(NANOFORGE_CUDA_EMULATION)
    emulator::launch_on_emulator<kKernel>(grid_, block_, shared_bytes_, stream_, site_,
                                          std::forward<Arguments>(arguments)...);
#else
    // clang-format would split the closing chevrons of a launch through a template parameter:
    // clang-format off
    kKernel<<<grid_, block_, shared_bytes_, stream_>>>(std::forward<Arguments>(arguments)...);
    // clang-format on
#endif
  }

 private:
  dim3 grid_, block_;
  size_t shared_bytes_;
  cudaStream_t stream_;
#if defined(NANOFORGE_CUDA_EMULATION)
  std::source_location site_;
#endif
};

#if defined(NANOFORGE_CUDA_EMULATION)
template <auto kKernel>
KernelLaunch<kKernel> launch_kernel(dim3 grid, dim3 block, size_t shared_bytes = 0,
                                    cudaStream_t stream = nullptr,
                                    std::source_location site = std::source_location::current()) {
  return KernelLaunch<kKernel>(grid, block, shared_bytes, stream, site);
}
#else
template <auto kKernel>
KernelLaunch<kKernel> launch_kernel(dim3 grid, dim3 block, size_t shared_bytes = 0,
                                    cudaStream_t stream = nullptr) {
  return KernelLaunch<kKernel>(grid, block, shared_bytes, stream);
}
#endif

}  // namespace nanoforge::cuda
