// Reading an HDF5 file's structures from its bytes, for the checks that run before libhdf5 parses them
// (h5/header_check.h, h5/group_check.h): a range of the file only when all of it is there, and little-endian
// fields (every 64-bit writer stores offsets and lengths in 8 little-endian bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

namespace nanoforge::h5_bytes {

template <class T>
T little_endian(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Bytes [offset, offset + count) of the file, or empty when they are not all there.
inline std::vector<uint8_t> read_range(std::ifstream& file, int64_t file_bytes, uint64_t offset,
                                       uint64_t count) {
  if (offset > static_cast<uint64_t>(file_bytes) || count > static_cast<uint64_t>(file_bytes) - offset)
    return {};
  std::vector<uint8_t> bytes(count);
  file.clear();
  file.seekg(static_cast<std::streamoff>(offset));
  file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(count));
  if (!file) return {};
  return bytes;
}

}  // namespace nanoforge::h5_bytes
