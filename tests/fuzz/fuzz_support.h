// What every fuzz target shares: a scratch directory (in memory where the machine has /dev/shm) where a
// target writes its input as the file a reader expects — the readers take paths — and the checks that turn a
// wrong answer into a finding: an error must name the file (or field) it is about, an accepted input must
// keep the properties the code promises. A broken check aborts, which libFuzzer reports as a crash.
#pragma once

#include <absl/status/status.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nanoforge::fuzz {

// A directory of this process's own, made on first use and removed at exit.
const std::string& scratch_dir();
// scratch_dir()/relative, with its parent directories created.
std::string scratch_path(std::string_view relative);

void write_file(const std::string& path, std::string_view bytes);
inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
}
std::string read_file(const std::string& path);

// Aborts when `status` is an error whose message does not contain `needle` (a file name, a field): every
// error about outside bytes must say where the problem is.
void require_named(const absl::Status& status, std::string_view needle);
// Aborts with `what` when `condition` is false.
void require(bool condition, std::string_view what);

}  // namespace nanoforge::fuzz
