// better_blas_coretype: compares OpenBLAS's kernel choice with what the CPU supports.
#include "kernels/blas_core.h"

#include <cblas.h>

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

}  // namespace nanoforge
