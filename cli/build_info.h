// The version facts `nanoforge --version` prints and benchmarks record: version and commit, build type,
// compiler, and what backend_info() reports about BLAS, threads and CUDA.
#pragma once

#include <string>

namespace nanoforge {

std::string version_line();    // "0.1.0 (commit 1a2b3c4d5e6f)"
std::string version_report();  // multi-line, for --version

}  // namespace nanoforge
