// OpenBLAS's runtime kernel choice. Built with DYNAMIC_ARCH, OpenBLAS picks its kernels from the CPU model
// number; on virtual machines that report an unknown model it falls back to "Prescott" (SSE3) kernels, about
// 8x slower than the AVX-512 ones the CPU can run. OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded,
// so the fix must be in the environment before the process starts: nanoforge re-executes itself once with
// the variable set (see train/main.cpp). An explicit OPENBLAS_CORETYPE is always respected.
#pragma once

#include <string>

namespace nanoforge {

// The core type OpenBLAS should use instead of the one it picked ("SkylakeX", "Haswell"), or "" when its
// choice is fine or the user has set OPENBLAS_CORETYPE.
std::string better_blas_coretype();

}  // namespace nanoforge
