// A whole file's CRC-32 (zlib's), computed on all cores over a read-only mapping and combined
// (crc32_combine), so that checking a checkpoint of many gigabytes costs about one read of it. Checkpoints
// record one per file in their manifest (train/checkpoint/checkpoint.h) and nanoforge compares them before
// libhdf5 parses a byte: a damaged file is refused whatever its damage, not only in checksummed datasets.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

namespace nanoforge {

struct FileChecksum {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

absl::StatusOr<FileChecksum> checksum_file(const std::string& path);

}  // namespace nanoforge
