// OpenBLAS's runtime kernel choice. Built with DYNAMIC_ARCH, OpenBLAS picks its kernels from the CPU model
// number; on virtual machines that report an unknown model it falls back to "Prescott" (SSE3) kernels, about
// 8x slower than the AVX-512 ones the CPU can run. OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded,
// so the fix must be in the environment before the process starts: nanoforge re-executes itself once with
// the variable set (see cli/main.cpp). An explicit OPENBLAS_CORETYPE is always respected.
#pragma once

#include <string>

namespace nanoforge {

// The core type OpenBLAS should use instead of the one it picked ("SkylakeX", "Haswell"), or "" when its
// choice is fine or the user has set OPENBLAS_CORETYPE.
std::string better_blas_coretype();

// Call first thing in main(): when better_blas_coretype() names a core type, sets OPENBLAS_CORETYPE and
// re-executes the program (same arguments) so OpenBLAS loads with it; returns only when no restart is needed
// or it failed (with a warning). Every nanoforge program (the CLI, the test binaries) does this, so they all
// compute with the same kernels and agree bit for bit.
void restart_with_best_blas_kernels(char** argv);

}  // namespace nanoforge
