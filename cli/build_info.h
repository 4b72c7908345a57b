// The version facts `nanoforge --version` prints and benchmarks record: version and commit, build type,
// compiler, and what backend_info() reports about BLAS, threads and CUDA.
#pragma once

#include <string>

namespace nanoforge {

std::string version_line();    // "0.1.0 (commit 1a2b3c4d5e6f)"
std::string version_report();  // multi-line, for --version

// The committed golden tokenizer of the source tree this program was built from (tests/data/tokenizer/
// golden): `bench tokenizer`'s default input. Kept here, in the one file that holds build facts, so that no
// other file has the clone's path on its compile line (a compiler cache shares them between clones).
std::string golden_tokenizer_dir();

}  // namespace nanoforge
