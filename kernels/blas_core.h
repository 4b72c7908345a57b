// OpenBLAS's runtime kernel choice. Built with DYNAMIC_ARCH, OpenBLAS picks its kernels from the CPU model
// number and falls back to generic kernels on a model it does not know: "Prescott" (SSE3) on x86-64, about 8x
// slower than the AVX-512 ones a virtual machine's CPU can run; "armv8" (or "armv8sve") on aarch64, e.g. on
// the DGX Spark's Cortex-X925/A725 cores, which Debian 12's and Ubuntu 24.04's OpenBLAS do not know. OpenBLAS
// reads OPENBLAS_CORETYPE once, when it is loaded, so the fix must be in the environment before the process
// starts: nanoforge re-executes itself once with the variable set (see cli/main.cpp). An explicit
// OPENBLAS_CORETYPE is always respected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nanoforge {

// The core type OpenBLAS should use instead of the one it picked ("SkylakeX", "Haswell", "NEOVERSEN2",
// ...), or "" when its choice is fine or the user has set OPENBLAS_CORETYPE.
std::string better_blas_coretype();

// The aarch64 rule of better_blas_coretype, for any machine to test: `chosen` is openblas_get_corename(),
// `config` openblas_get_config() ("OpenBLAS 0.3.21 ... DYNAMIC_ARCH ..."), hwcap and hwcap2 the Linux arm64
// feature words (getauxval(AT_HWCAP), getauxval(AT_HWCAP2)). "" keeps OpenBLAS's choice.
std::string better_arm_blas_coretype(std::string_view chosen, std::string_view config, uint64_t hwcap,
                                     uint64_t hwcap2);

// Call first thing in main(): when better_blas_coretype() names a core type, sets OPENBLAS_CORETYPE and
// re-executes the program (same arguments) so OpenBLAS loads with it; returns only when no restart is needed
// or it failed (with a warning). Every nanoforge program (the CLI, the test binaries) does this, so they all
// compute with the same kernels and agree bit for bit.
void restart_with_best_blas_kernels(char** argv);

}  // namespace nanoforge
