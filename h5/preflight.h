// What nanoforge checks in an HDF5 file's own bytes before libhdf5 parses any of it: that it is a regular
// file, that it starts with the HDF5 signature and a superblock of a known version, written with 8-byte
// offsets and lengths (what every 64-bit writer uses), and that the end-of-file address the superblock
// records lies inside the file. libhdf5 has a long record of crashes on malformed files; these checks turn
// the commonest damage (truncation, a wrong or garbled file) into one clear error. docs/untrusted-input.md
// says what they do not cover.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

namespace nanoforge {

struct Hdf5Superblock {
  int64_t file_bytes = 0;            // the file's size
  uint64_t root_header_address = 0;  // the root group's object header, as the superblock records it
};

// What the superblock says when it passes, else an error naming the file and the problem.
absl::StatusOr<Hdf5Superblock> preflight_hdf5_file(const std::string& path);

}  // namespace nanoforge
