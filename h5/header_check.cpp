// The object-header walk of check_object_header. Layouts from the HDF5 file format specification (version 1
// object headers, attribute messages versions 1-3, datatype and dataspace messages, data layout messages
// versions 1-4); offsets and lengths are 8 bytes, as every 64-bit writer stores them.
#include "h5/header_check.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "h5/file_bytes.h"

namespace nanoforge {
namespace {

using h5_bytes::little_endian;
using h5_bytes::read_range;

constexpr uint16_t kContinuationMessage = 0x10;
constexpr uint16_t kAttributeMessage = 0x0C;
constexpr uint16_t kLayoutMessage = 0x08;
constexpr uint16_t kSymbolTableMessage = 0x11;
constexpr uint8_t kChunkedLayout = 2;
// A message header's flag "shared": the message's body only points to where it is kept, another object
// header or the file's shared-message heap. Following such a pointer in a damaged file crashed libhdf5 1.10
// (a fill-value message flagged shared: a null read under H5SM_get_fheap_addr, in a file with no
// shared-message table); nanoforge and h5py (unless given a committed datatype) write none, so none is read.
constexpr uint8_t kSharedMessageFlag = 0x02;
// An attribute message (versions 2, 3) says in its own flags whether its datatype (bit 0) or dataspace
// (bit 1) is such a pointer.
constexpr uint8_t kAttributePartsShared = 0x03;
constexpr int kMaxChunks = 4096;  // continuation chunks per header: more means a loop in a damaged file
constexpr uint64_t kMaxChunkBytes = uint64_t{16} << 20;  // far above any real header (a message is < 64 KiB)
constexpr int kMaxRank = 32;                             // HDF5's limit
constexpr uint8_t kVariableLengthClass = 9;
constexpr uint64_t kVariableLengthReferenceBytes = 16;  // length, global heap address, object index

uint64_t round_up_8(uint64_t n) {
  return (n + 7) / 8 * 8;
}

// The size of one element of the datatype message `type` (`size` bytes), as stored in an attribute.
bool element_bytes(const uint8_t* type, uint64_t size, uint64_t& bytes) {
  if (size < 8) return false;
  bytes = (type[0] & 0x0f) == kVariableLengthClass ? kVariableLengthReferenceBytes
                                                   : little_endian<uint32_t>(type + 4);
  return true;
}

// The number of elements of the dataspace message `space` (`size` bytes).
bool element_count(const uint8_t* space, uint64_t size, uint64_t& count) {
  if (size < 4) return false;
  const uint8_t version = space[0], rank = space[1];
  if (rank > kMaxRank) return false;
  uint64_t dims_at = 0;
  count = 1;
  if (version == 1) {
    dims_at = 8;
  } else if (version == 2) {
    dims_at = 4;
    if (space[3] == 2) count = 0;  // a null dataspace holds nothing
  } else {
    return false;
  }
  if (dims_at + 8 * uint64_t{rank} > size) return false;
  for (int d = 0; d < rank; ++d) {
    if (__builtin_mul_overflow(count, little_endian<uint64_t>(space + dims_at + 8 * d), &count)) return false;
  }
  return true;
}

// One attribute message: its name, datatype, dataspace and value inside its `size` bytes.
bool attribute_fits(const uint8_t* message, uint64_t size) {
  if (size < 8) return false;
  const uint8_t version = message[0];
  const uint64_t name = little_endian<uint16_t>(message + 2), type = little_endian<uint16_t>(message + 4),
                 space = little_endian<uint16_t>(message + 6);
  uint64_t at = 0, name_end = 0, type_end = 0, space_end = 0;
  if (version == 1) {  // parts padded to 8 bytes
    at = 8;
    name_end = at + round_up_8(name);
    type_end = name_end + round_up_8(type);
    space_end = type_end + round_up_8(space);
  } else if (version == 2 || version == 3) {
    at = version == 2 ? 8 : 9;  // version 3 adds the name's character set
    name_end = at + name;
    type_end = name_end + type;
    space_end = type_end + space;
  } else {
    return false;
  }
  if (space_end > size) return false;
  uint64_t bytes = 0, count = 0, value = 0;
  if (!element_bytes(message + name_end, type, bytes) || !element_count(message + type_end, space, count))
    return false;
  return !__builtin_mul_overflow(bytes, count, &value) && value <= size - space_end;
}

// One data layout message: unless it is chunked, true; if it is, whether its chunk dimensions (the last of
// versions 1-3 is the element size) lie inside the message and none is 0 — libhdf5 divides by each.
bool chunk_dimensions_valid(const uint8_t* message, uint64_t size) {
  if (size < 2) return false;
  const uint8_t version = message[0];
  uint64_t rank = 0, dims_at = 0, dim_bytes = 4;
  if (version == 1 || version == 2) {  // version, rank, class, 5 reserved, address (not compact), dims
    if (size < 3 || message[2] != kChunkedLayout) return true;
    rank = message[1];
    dims_at = 16;
  } else if (version == 3) {  // version, class, rank, address, dims, element size
    if (message[1] != kChunkedLayout) return true;
    if (size < 3) return false;
    rank = message[2];
    dims_at = 11;
  } else if (version == 4) {  // version, class, flags, rank, bytes per dimension, dims
    if (message[1] != kChunkedLayout) return true;
    if (size < 5) return false;
    rank = message[3];
    dim_bytes = message[4];
    dims_at = 5;
    if (dim_bytes < 1 || dim_bytes > 8) return false;
  } else {
    return true;  // libhdf5 refuses versions it does not know
  }
  if (rank < 1 || rank > kMaxRank + 1 || dims_at + rank * dim_bytes > size) return false;
  for (uint64_t d = 0; d < rank; ++d) {
    uint64_t value = 0;
    std::memcpy(&value, message + dims_at + d * dim_bytes, dim_bytes);  // little-endian, as the host
    if (value == 0) return false;
  }
  return true;
}

}  // namespace

absl::Status check_object_header(const std::string& path, int64_t file_bytes, uint64_t header_address,
                                 const std::string& object_path, std::optional<SymbolTable>* symbol_table) {
  if (symbol_table != nullptr) symbol_table->reset();
  auto damaged = [&](const std::string& what) {
    return absl::DataLossError(
        fmt::format("{}: the object header of {} is damaged ({}): corrupt file", path, object_path, what));
  };
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(fmt::format("{}: cannot open for reading", path));
  const std::vector<uint8_t> prefix = read_range(file, file_bytes, header_address, 16);
  if (prefix.empty()) return damaged("it lies outside the file");
  if (std::memcmp(prefix.data(), "OHDR", 4) == 0) return absl::OkStatus();  // version 2: not checked here
  if (prefix[0] != 1) return damaged(fmt::format("version {}", prefix[0]));
  // Chunks of messages: the first follows the 16-byte prefix, the others are named by continuation messages.
  std::vector<std::pair<uint64_t, uint64_t>> chunks = {
      {header_address + 16, little_endian<uint32_t>(&prefix[8])}};
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (c >= kMaxChunks) return damaged("too many continuation chunks");
    if (chunks[c].second > kMaxChunkBytes)
      return damaged(fmt::format("a chunk of {} bytes", chunks[c].second));
    const std::vector<uint8_t> chunk = read_range(file, file_bytes, chunks[c].first, chunks[c].second);
    if (chunk.empty() && chunks[c].second > 0) return damaged("a chunk of messages lies outside the file");
    for (uint64_t at = 0; at + 8 <= chunk.size();) {
      const uint16_t type = little_endian<uint16_t>(&chunk[at]);
      const uint64_t size = little_endian<uint16_t>(&chunk[at + 2]);
      const uint8_t flags = chunk[at + 4];
      at += 8;
      if (size > chunk.size() - at) return damaged("a message runs past its chunk");
      const bool attribute_parts_shared = type == kAttributeMessage && size >= 2 &&
                                          (chunk[at] == 2 || chunk[at] == 3) &&
                                          (chunk[at + 1] & kAttributePartsShared) != 0;
      if ((flags & kSharedMessageFlag) != 0 || attribute_parts_shared)
        return damaged("a shared message, kept elsewhere: nanoforge reads only files without them");
      if (type == kContinuationMessage) {
        if (size < 16) return damaged("a short continuation message");
        chunks.emplace_back(little_endian<uint64_t>(&chunk[at]), little_endian<uint64_t>(&chunk[at + 8]));
      } else if (type == kAttributeMessage && !attribute_fits(&chunk[at], size)) {
        return damaged("an attribute's name, type, shape or value does not fit in its message");
      } else if (type == kLayoutMessage && !chunk_dimensions_valid(&chunk[at], size)) {
        return damaged("its chunk dimensions are 0 or do not fit in the layout message");
      } else if (type == kSymbolTableMessage && symbol_table != nullptr) {
        if (size < 16) return damaged("a short symbol table message");
        *symbol_table =
            SymbolTable{little_endian<uint64_t>(&chunk[at]), little_endian<uint64_t>(&chunk[at + 8])};
      }
      at += size;
    }
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
