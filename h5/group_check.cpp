// The walk of check_group_tree. Layouts from the HDF5 file format specification: "Local Heap", "Version 1
// B-trees" (node type 0: group nodes) and "Symbol Table Node"; offsets and lengths are 8 bytes (the
// superblock check requires it).
#include "h5/group_check.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "h5/file_bytes.h"
#include "h5/header_check.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using h5_bytes::little_endian;
using h5_bytes::read_range;

constexpr uint64_t kFreeListEnd = 1;        // libhdf5's H5HL_FREE_NULL: the end of a heap's free list
constexpr uint64_t kHeapHeaderBytes = 32;   // "HEAP", version, 3 reserved, data size, free list, data address
constexpr uint64_t kFreeBlockBytes = 16;    // a free block starts with the next block's offset and its size
constexpr uint64_t kNodeHeaderBytes = 24;   // "TREE", type, level, entries used, left and right siblings
constexpr uint64_t kSymbolHeaderBytes = 8;  // "SNOD", version, reserved, number of symbols
constexpr uint64_t kSymbolEntryBytes = 40;  // name offset, header address, cache type, reserved, scratch
constexpr uint8_t kGroupNode = 0;
constexpr uint32_t kSoftLinkCache = 2;  // an entry's cache type for a soft link (its header address is unset)
constexpr int kMaxLevel = 32;  // a B-tree of 2^32 nodes per level would be taller than any file holds

class GroupWalk {
 public:
  GroupWalk(const std::string& path, int64_t file_bytes)
      : path_(path), file_bytes_(file_bytes), file_(path, std::ios::binary) {}

  absl::Status run(uint64_t root_header_address) {
    if (!file_) return absl::NotFoundError(fmt::format("{}: cannot open for reading", path_));
    std::vector<std::pair<uint64_t, std::string>> objects = {{root_header_address, "/"}};
    visited_headers_.insert(root_header_address);
    while (!objects.empty()) {
      const auto [address, object_path] = std::move(objects.back());
      objects.pop_back();
      std::optional<SymbolTable> table;
      NANOFORGE_RETURN_IF_ERROR(check_object_header(path_, file_bytes_, address, object_path, &table));
      if (table) NANOFORGE_RETURN_IF_ERROR(walk_group(*table, object_path, objects));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status damaged(const std::string& group, const std::string& what) const {
    return absl::DataLossError(
        fmt::format("{}: the group {} is damaged ({}): corrupt file", path_, group, what));
  }

  // The group's heap data, its B-tree and symbol-table nodes; the objects it names join `objects`.
  absl::Status walk_group(const SymbolTable& table, const std::string& group,
                          std::vector<std::pair<uint64_t, std::string>>& objects) {
    std::vector<uint8_t> names;
    NANOFORGE_RETURN_IF_ERROR(read_heap(table.heap_address, group, names));
    std::vector<std::pair<uint64_t, int>> nodes = {{table.btree_address, -1}};  // address, expected level
    while (!nodes.empty()) {
      const auto [address, expected_level] = nodes.back();
      nodes.pop_back();
      if (!visited_nodes_.insert(address).second) return damaged(group, "a B-tree node is reached twice");
      const std::vector<uint8_t> head = read_range(file_, file_bytes_, address, kNodeHeaderBytes);
      if (head.empty()) return damaged(group, "a B-tree node lies outside the file");
      if (std::memcmp(head.data(), "TREE", 4) != 0 || head[4] != kGroupNode)
        return damaged(group, "a B-tree node without the TREE signature of a group node");
      const int level = head[5];
      if (level > kMaxLevel || (expected_level >= 0 && level != expected_level))
        return damaged(group,
                       fmt::format("a B-tree node at level {} where {} belongs", level, expected_level));
      const uint64_t entries = little_endian<uint16_t>(&head[6]);
      // Keys and children alternate: key 0, child 0, ..., child n-1, key n; only the children matter here.
      const std::vector<uint8_t> body =
          read_range(file_, file_bytes_, address + kNodeHeaderBytes, entries * 16 + 8);
      if (body.empty()) return damaged(group, "a B-tree node runs past the end of the file");
      for (uint64_t e = 0; e < entries; ++e) {
        const uint64_t child = little_endian<uint64_t>(&body[e * 16 + 8]);
        if (level > 0) {
          nodes.emplace_back(child, level - 1);
        } else {
          NANOFORGE_RETURN_IF_ERROR(read_symbols(child, group, names, objects));
        }
      }
    }
    return absl::OkStatus();
  }

  // The local heap at `address`: its data (the names) into `names`, once its free list checks out — inside
  // the data, each block whole, and no longer than the data could hold (a loop never ends otherwise).
  absl::Status read_heap(uint64_t address, const std::string& group, std::vector<uint8_t>& names) {
    const std::vector<uint8_t> head = read_range(file_, file_bytes_, address, kHeapHeaderBytes);
    if (head.empty()) return damaged(group, "its local heap lies outside the file");
    if (std::memcmp(head.data(), "HEAP", 4) != 0 || head[4] != 0)
      return damaged(group, "its local heap has no HEAP signature of version 0");
    const uint64_t data_bytes = little_endian<uint64_t>(&head[8]);
    const uint64_t free_list = little_endian<uint64_t>(&head[16]);
    names = read_range(file_, file_bytes_, little_endian<uint64_t>(&head[24]), data_bytes);
    if (names.size() != data_bytes) return damaged(group, "its local heap's data lies outside the file");
    uint64_t steps = 0;
    for (uint64_t block = free_list; block != kFreeListEnd; block = little_endian<uint64_t>(&names[block])) {
      if (block > data_bytes || data_bytes - block < kFreeBlockBytes)
        return damaged(group, "a free block of its local heap lies outside the heap");
      if (++steps > data_bytes / kFreeBlockBytes)  // blocks do not overlap: more of them means a loop
        return damaged(group, "its local heap's free list loops");
      if (little_endian<uint64_t>(&names[block + 8]) > data_bytes - block)
        return damaged(group, "a free block of its local heap runs past the heap");
    }
    return absl::OkStatus();
  }

  // A symbol-table node: each entry's name a string inside the heap, its object inside the file.
  absl::Status read_symbols(uint64_t address, const std::string& group, const std::vector<uint8_t>& names,
                            std::vector<std::pair<uint64_t, std::string>>& objects) {
    if (!visited_nodes_.insert(address).second) return damaged(group, "a symbol-table node is reached twice");
    const std::vector<uint8_t> head = read_range(file_, file_bytes_, address, kSymbolHeaderBytes);
    if (head.empty() || std::memcmp(head.data(), "SNOD", 4) != 0)
      return damaged(group, "a symbol-table node without the SNOD signature");
    const uint64_t symbols = little_endian<uint16_t>(&head[6]);
    const std::vector<uint8_t> entries =
        read_range(file_, file_bytes_, address + kSymbolHeaderBytes, symbols * kSymbolEntryBytes);
    if (entries.size() != symbols * kSymbolEntryBytes)
      return damaged(group, "a symbol-table node runs past the end of the file");
    for (uint64_t s = 0; s < symbols; ++s) {
      const uint8_t* entry = &entries[s * kSymbolEntryBytes];
      const uint64_t name_at = little_endian<uint64_t>(entry);
      const uint64_t header = little_endian<uint64_t>(entry + 8);
      const void* end =
          name_at < names.size() ? std::memchr(&names[name_at], 0, names.size() - name_at) : nullptr;
      if (end == nullptr) return damaged(group, "a link's name lies outside its local heap");
      if (little_endian<uint32_t>(entry + 16) == kSoftLinkCache) continue;  // a path, no object of its own
      if (header >= static_cast<uint64_t>(file_bytes_))
        return damaged(group, "a link names an object outside the file");
      const std::string name(reinterpret_cast<const char*>(&names[name_at]));
      if (visited_headers_.insert(header).second)
        objects.emplace_back(header, (group == "/" ? "/" : group + "/") + name);
    }
    return absl::OkStatus();
  }

  const std::string& path_;
  const int64_t file_bytes_;
  std::ifstream file_;
  std::set<uint64_t> visited_headers_;  // an object linked twice (a hard link) is checked once
  std::set<uint64_t> visited_nodes_;
};

}  // namespace

absl::Status check_group_tree(const std::string& path, int64_t file_bytes, uint64_t root_header_address) {
  return GroupWalk(path, file_bytes).run(root_header_address);
}

}  // namespace nanoforge
