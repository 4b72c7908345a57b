// backend_info: reads OpenBLAS's own configuration and OpenMP's thread count, and asks the CUDA backend.
#include "kernels/backend_info.h"

#include <cblas.h>
#include <omp.h>

#include "kernels/cuda/cuda_memory.h"

namespace nanoforge {

BackendInfo backend_info() {
  BackendInfo info;
  info.blas = openblas_get_config();
  info.blas_core = openblas_get_corename();
  info.blas_uses_openmp = openblas_get_parallel() == 2;  // 0 sequential, 1 pthreads, 2 OpenMP
  info.cpu_threads = omp_get_max_threads();
#ifdef NANOFORGE_HAVE_CUDA
  info.cuda_built = true;
  info.cuda_architectures = NANOFORGE_CUDA_ARCHITECTURES;
  info.cuda_toolkit = NANOFORGE_CUDA_TOOLKIT_VERSION;
#endif
  info.cuda_emulated = cuda::emulated();
  info.cuda_usable = cuda::available(&info.cuda_status);
  return info;
}

void set_cpu_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

}  // namespace nanoforge
