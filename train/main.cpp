// The `nanoforge` program. Before anything else it makes sure OpenBLAS runs the kernels this CPU supports
// (see kernels/blas_core.h); everything else is in run_cli and the commands it dispatches to.
#include "kernels/blas_core.h"
#include "train/cli.h"

int main(int argc, char** argv) {
  nanoforge::restart_with_best_blas_kernels(argv);
  return nanoforge::run_cli(argc, argv);
}
