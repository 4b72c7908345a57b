// libhdf5 1.10 trusts the structures through which it finds an object by name — a group's local heap (the
// links' names), its B-tree and its symbol-table nodes — and a loop in them makes it allocate without end:
// a model.h5 whose root heap's free list pointed back into itself made H5Lexists take 2 GB in seconds
// (fuzzing found it). check_group_tree walks every group of a file from the root through those structures
// itself, before libhdf5 opens the file: each local heap's data inside the file and its free list inside the
// heap and finite; each B-tree node of the group kind at the level its parent expects and visited once; each
// symbol-table node's entries naming a string inside the heap and an object header inside the file; and
// every object so reached through check_object_header (h5/header_check.h). Groups in the newer format
// (version-2 object headers, link messages) are not walked: nanoforge and h5py write the original one.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

namespace nanoforge {

// The group tree of `path` (a file of `file_bytes`) from the root group's object header. OK, or an error
// naming the file, the group and what is damaged.
absl::Status check_group_tree(const std::string& path, int64_t file_bytes, uint64_t root_header_address);

}  // namespace nanoforge
