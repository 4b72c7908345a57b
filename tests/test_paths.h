// Where the tests find this checkout and the programs they start. The paths are written at configure time
// into one generated file (tests/test_paths.cpp.in, made in the build tree), not onto every test's compile
// line, so that the test objects are the same in any clone and a compiler cache shares them between clones.
#pragma once

#include <string>

namespace nanoforge::test {

const char* source_dir();            // the repository's root
const char* nanoforge_binary();      // the `nanoforge` program of this build tree (tests/CMakeLists.txt)
const char* gpu_nanoforge_binary();  // the program that runs on this tree's GPU: nanoforge-emulated where
                                     // the tests run on the CUDA emulator, else nanoforge
const char* python();                // the build tree's Python (build/python), which runs tools/
const char* mpiexec();               // Open MPI's mpirun, found by CMake
const char* lost_rank_worker();      // tests/dist/lost_rank_worker.cpp's program
const char* io_fault_preload();      // LD_PRELOAD for the I/O fault tests (the shim; ASan's runtime first)

// source_dir() + "/" + relative, e.g. source_path("tests/parity/golden").
std::string source_path(const std::string& relative);

}  // namespace nanoforge::test
