// main() of every test binary: the same OpenBLAS kernels as the nanoforge program (kernels/blas_core.h), so a
// test that compares its own computation with a nanoforge child process compares like with like; then
// GoogleTest, with TMPDIR (which temp_directory_path() and every child read) pointed at a fresh folder of
// this process that goes when RUN_ALL_TESTS returns, with whatever a test, an early ASSERT or a child left in
// it. NANOFORGE_KEEP_TEST_FILES=1 keeps the folder (its path is printed). Why: docs/build.md, "Disk".
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "kernels/blas_core.h"

namespace {

// Makes <temp>/nanoforge_test_XXXXXX and points TMPDIR at it for this process and its children.
std::string enter_scratch_folder() {
  std::string folder = (std::filesystem::temp_directory_path() / "nanoforge_test_XXXXXX").string();
  if (mkdtemp(folder.data()) == nullptr) {
    std::perror(("cannot create a scratch folder " + folder + " for the tests' files").c_str());
    std::exit(1);
  }
  setenv("TMPDIR", folder.c_str(), 1);
  return folder;
}

void leave_scratch_folder(const std::string& folder) {
  const char* keep = std::getenv("NANOFORGE_KEEP_TEST_FILES");
  if (keep != nullptr && std::string(keep) == "1") {
    std::fprintf(stderr, "the tests' files are kept in %s\n", folder.c_str());
    return;
  }
  std::error_code error;
  std::filesystem::remove_all(folder, error);
  if (error) {
    std::fprintf(stderr, "warning: could not remove the tests' folder %s: %s\n", folder.c_str(),
                 error.message().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  nanoforge::restart_with_best_blas_kernels(argv);
  ::testing::InitGoogleTest(&argc, argv);
  const std::string scratch = enter_scratch_folder();
  const int result = RUN_ALL_TESTS();
  leave_scratch_folder(scratch);
  return result;
}
