// The scratch directory and the checks of fuzz_support.h.
#include "tests/fuzz/fuzz_support.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace nanoforge::fuzz {

namespace fs = std::filesystem;

const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the directory runs after static destructors would have.
  static const std::string* const dir = [] {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    auto* made = new std::string((base / fmt::format("nanoforge_fuzz_{}_XXXXXX", ::getpid())).string());
    if (::mkdtemp(made->data()) == nullptr) {
      std::fprintf(stderr, "fuzz: cannot create a scratch directory %s\n", made->c_str());
      std::abort();
    }
    // Removed at a normal exit (libFuzzer's -runs / -max_total_time end with exit()).
    std::atexit([] {
      std::error_code error;
      fs::remove_all(*dir, error);
    });
    return made;
  }();
  return *dir;
}

std::string scratch_path(std::string_view relative) {
  const fs::path path = fs::path(scratch_dir()) / relative;
  fs::create_directories(path.parent_path());
  return path.string();
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void require_named(const absl::Status& status, std::string_view needle) {
  if (status.ok() || std::string(status.message()).find(needle) != std::string::npos) return;
  std::fprintf(stderr, "fuzz: the error does not name %.*s: %s\n", static_cast<int>(needle.size()),
               needle.data(), status.ToString().c_str());
  std::abort();
}

void require(bool condition, std::string_view what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz: broken property: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace nanoforge::fuzz
