// Helpers shared by the tokenizer tests: the committed golden files, temporary directories, small files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tests/test_paths.h"

namespace nanoforge::testing {

inline std::string golden_dir() {
  return nanoforge::test::source_path("tests/data/tokenizer/golden");
}
inline std::string golden_path(const std::string& name) {
  return golden_dir() + "/" + name;
}

// A fresh empty directory under the system temp directory, unique to this process and `name`.
inline std::string fresh_temp_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("nanoforge_test_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void write_file(const std::string& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace nanoforge::testing
