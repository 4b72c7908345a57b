// The `nanoforge` program. Before anything else it makes sure OpenBLAS runs the kernels this CPU supports
// (see kernels/blas_core.h); everything else is in run_cli and the commands it dispatches to.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>

#include "kernels/blas_core.h"
#include "train/cli.h"

int main(int argc, char** argv) {
  const std::string coretype = nanoforge::better_blas_coretype();
  if (!coretype.empty()) {
    setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
    execv("/proc/self/exe", argv);
    fmt::print(stderr,
               "nanoforge: warning: could not restart with OPENBLAS_CORETYPE={}; set it yourself for "
               "faster CPU matrix products\n",
               coretype);
  }
  return nanoforge::run_cli(argc, argv);
}
