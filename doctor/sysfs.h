// Reading sysfs (and procfs) files, which answer in one short line or not at all.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace nanoforge {

// The first line of a sysfs file, without its newline; empty when it cannot be read (sysfs answers EINVAL
// for unused GID-table entries).
inline std::string read_sysfs_line(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return "";
  return line;
}

}  // namespace nanoforge
