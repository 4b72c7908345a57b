// preflight_hdf5_file: the superblock read with plain file I/O (layout: the HDF5 File Format Specification,
// "Superblock", versions 0 to 3).
#include "h5/preflight.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace nanoforge {
namespace {

constexpr std::array<unsigned char, 8> kSignature = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
// Superblock version 2 and 3 are 48 bytes, versions 0 and 1 longer: no HDF5 file is shorter than this.
constexpr int64_t kSmallestSuperblockBytes = 48;
constexpr uint64_t kUndefinedAddress = ~uint64_t{0};

uint64_t little_endian_u64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = value << 8 | bytes[i];
  return value;
}

}  // namespace

absl::StatusOr<Hdf5Superblock> preflight_hdf5_file(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status))
    return absl::NotFoundError(fmt::format("{}: no such file", path));
  if (!std::filesystem::is_regular_file(status))
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (error) return absl::PermissionDeniedError(fmt::format("{}: cannot stat: {}", path, error.message()));
  std::array<unsigned char, 128> head{};  // the longest superblock (version 1, 100 bytes) whole
  {
    std::ifstream file(path, std::ios::binary);
    if (!file) return absl::PermissionDeniedError(fmt::format("{}: cannot open for reading", path));
    file.read(reinterpret_cast<char*>(head.data()), head.size());
  }
  if (file_bytes < kSmallestSuperblockBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: not an HDF5 file ({} bytes, shorter than any HDF5 superblock; truncated?)", path, file_bytes));
  }
  if (std::memcmp(head.data(), kSignature.data(), kSignature.size()) != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not an HDF5 file (no HDF5 signature at byte 0; truncated or wrong file?)", path));
  }
  const int version = head[8];
  int offset_bytes = 0, length_bytes = 0, base_at = 0, end_at = 0, root_at = 0;
  int64_t superblock_bytes = 0;
  switch (version) {
    case 0:
    case 1:
      offset_bytes = head[13];
      length_bytes = head[14];
      base_at = version == 0 ? 24 : 28;      // version 1 adds a 2-byte K and 2 reserved bytes before it
      end_at = base_at + 16;                 // after the base and the free-space addresses
      superblock_bytes = base_at + 32 + 40;  // four addresses and the root group's symbol-table entry
      root_at = base_at + 32 + 8;            // the entry's object header address, after its name offset
      break;
    case 2:
    case 3:
      offset_bytes = head[9];
      length_bytes = head[10];
      base_at = 12;
      end_at = 28;   // after the base and the superblock-extension addresses
      root_at = 36;  // after the base, superblock-extension and end-of-file addresses
      superblock_bytes = 48;
      break;
    default:
      return absl::InvalidArgumentError(fmt::format(
          "{}: HDF5 superblock version {}; HDF5 writes versions 0 to 3 (corrupt file?)", path, version));
  }
  if (offset_bytes != 8 || length_bytes != 8) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: HDF5 file with {}-byte addresses and {}-byte lengths; nanoforge reads files written with 8 "
        "(every 64-bit HDF5 writer; corrupt file?)",
        path, offset_bytes, length_bytes));
  }
  if (file_bytes < superblock_bytes) {
    return absl::DataLossError(fmt::format("{}: truncated: {} bytes, shorter than its {}-byte superblock",
                                           path, file_bytes, superblock_bytes));
  }
  const uint64_t base = little_endian_u64(&head[static_cast<size_t>(base_at)]);
  const uint64_t end = little_endian_u64(&head[static_cast<size_t>(end_at)]);
  if (base != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: HDF5 base address {} (a user block or a corrupt superblock); nanoforge reads files whose "
        "superblock is at byte 0",
        path, base));
  }
  if (end == kUndefinedAddress || end < static_cast<uint64_t>(superblock_bytes)) {
    return absl::DataLossError(
        fmt::format("{}: the superblock's end-of-file address {} is not valid (corrupt file)", path, end));
  }
  if (end > static_cast<uint64_t>(file_bytes)) {
    return absl::DataLossError(fmt::format(
        "{}: truncated: the superblock says the file ends at byte {} but it has {} bytes; re-create or "
        "re-copy it",
        path, end, file_bytes));
  }
  return Hdf5Superblock{file_bytes, little_endian_u64(&head[static_cast<size_t>(root_at)])};
}

}  // namespace nanoforge
