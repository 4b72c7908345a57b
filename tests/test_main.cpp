// main() of every test binary: the same OpenBLAS kernels as the nanoforge program (kernels/blas_core.h), so a
// test that compares its own computation with a nanoforge child process compares like with like; then
// GoogleTest.
#include <gtest/gtest.h>

#include "kernels/blas_core.h"

int main(int argc, char** argv) {
  nanoforge::restart_with_best_blas_kernels(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
