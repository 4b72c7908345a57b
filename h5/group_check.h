// libhdf5 1.10 trusts the structures through which it finds an object by name (a group's local heap, its
// B-tree and symbol-table nodes), and a loop in them makes it allocate without end (found by fuzzing).
// check_group_tree walks every group of a file from the root through those structures itself, before
// libhdf5 opens the file, and checks every object so reached with check_object_header (h5/header_check.h).
// Groups in the newer format (version-2 object headers) are not walked: nanoforge and h5py write the original
// one. docs/untrusted-input.md lists each check.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

namespace nanoforge {

// The group tree of `path` (a file of `file_bytes`) from the root group's object header. OK, or an error
// naming the file, the group and what is damaged.
absl::Status check_group_tree(const std::string& path, int64_t file_bytes, uint64_t root_header_address);

}  // namespace nanoforge
