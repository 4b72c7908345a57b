// What the compute backends of this build and machine are: the BLAS behind the CPU backend and its
// threading, the OpenMP thread count, and whether the CUDA backend is built and sees a GPU. Printed by
// `nanoforge --version` and recorded by benchmarks, so every number says what produced it.
#pragma once

#include <string>

namespace nanoforge {

struct BackendInfo {
  std::string blas;       // e.g. "OpenBLAS 0.3.21 ... USE_OPENMP ..."
  std::string blas_core;  // the kernels OpenBLAS runs, e.g. "SkylakeX"
  bool blas_uses_openmp = false;
  int cpu_threads = 0;  // OpenMP threads ops will use
  bool cuda_built = false;
  // The CUDA backend is the CPU emulator of CUDA (nanoforge-emulated and the tests, emulator/), not a GPU.
  bool cuda_emulated = false;
  std::string cuda_architectures;  // built-for list of the real build, e.g. "90,121"
  std::string cuda_toolkit;        // the CUDA release the real build was compiled with, e.g. "13.0"
  bool cuda_usable = false;
  std::string cuda_status;  // device name, or why CUDA is not usable
};

BackendInfo backend_info();

// Sets the OpenMP thread count used by the CPU ops and by OpenBLAS (0 leaves it unchanged).
void set_cpu_threads(int threads);

}  // namespace nanoforge
