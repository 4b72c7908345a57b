// better_blas_coretype: compares OpenBLAS's kernel choice with what the CPU supports.
#include "kernels/blas_core.h"

#include <cblas.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace nanoforge {

std::string better_blas_coretype() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  const std::string_view chosen = openblas_get_corename();
  if (chosen != "Prescott" && chosen != "prescott") return "";  // only OpenBLAS's unknown-CPU fallback
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

void restart_with_best_blas_kernels(char** argv) {
  const std::string coretype = better_blas_coretype();
  if (coretype.empty()) return;
  setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
  execv("/proc/self/exe", argv);
  fmt::print(
      stderr,
      "nanoforge: warning: could not restart with OPENBLAS_CORETYPE={}; set it yourself for faster CPU "
      "matrix products\n",
      coretype);
}

}  // namespace nanoforge
