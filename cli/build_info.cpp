// version_line / version_report.
#include "cli/build_info.h"

#include <fmt/format.h>

#include "kernels/backend_info.h"
#include "support/version.h"

namespace nanoforge {

std::string version_line() {
  return fmt::format("{} (commit {})", version(), git_commit());
}

std::string version_report() {
  const BackendInfo info = backend_info();
  std::string cuda = info.cuda_built ? fmt::format("built for sm {}; {}", info.cuda_architectures,
                                                   info.cuda_usable ? info.cuda_status
                                                                    : "not usable here: " + info.cuda_status)
                                     : "not built";
  return fmt::format(
      "nanoforge {}\n"
      "  build:   {} with {} {}\n"
      "  cpu:     {} OpenMP threads; BLAS: {}{}, {} kernels\n"
      "  cuda:    {}",
      version_line(), NANOFORGE_BUILD_TYPE, NANOFORGE_COMPILER_ID, NANOFORGE_COMPILER_VERSION,
      info.cpu_threads, info.blas,
      info.blas_uses_openmp ? " (OpenMP build)" : " (not the OpenMP build: see docs/build.md)",
      info.blas_core, cuda);
}

std::string golden_tokenizer_dir() {
  return NANOFORGE_TOKENIZER_GOLDEN_DIR;
}

}  // namespace nanoforge
