// What the CORE tests share: where the committed bundle, golden and checkpoint are, a scratch copy of the
// bundle to break, and file helpers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/test_paths.h"

namespace nanoforge::test {

inline const std::string kCoreDir = source_path("tests/eval/core");
inline const std::string kCoreBundle = kCoreDir + "/bundle";  // the committed small bundle
inline const std::string kCoreGolden = kCoreDir + "/golden/core_golden.json";
inline const std::string kCoreCheckpoint = kCoreDir + "/golden/checkpoint";  // the model the golden scored
inline const std::string kCoreTokenizer = source_path("tests/data/tokenizer/golden");

// For EXPECT_PRED2(contains, text, part): the failure prints both.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh copy of the committed bundle under the temp directory, to change.
inline std::string bundle_copy(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("nanoforge_core_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::copy(kCoreBundle, dir, std::filesystem::copy_options::recursive);
  return dir.string();
}

}  // namespace nanoforge::test
