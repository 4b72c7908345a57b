// libhdf5 1.10 decodes some object-header messages without checking them, and damaged ones crash it before
// any query could look (an attribute value past its message, a chunk dimension of 0, a message flagged
// "shared"; all found by fuzzing). check_object_header reads an object header's bytes itself — version 1,
// as nanoforge and h5py write them, following its continuation chunks — and checks those messages before
// libhdf5 looks at any of them. docs/untrusted-input.md says what is checked and why; docs/fuzzing.md lists
// what such checks do not cover.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <optional>
#include <string>

namespace nanoforge {

// Where a group of the original format keeps its links: a version-1 B-tree of symbol-table nodes, and a
// local heap with the links' names (the symbol table message of its object header).
struct SymbolTable {
  uint64_t btree_address = 0;
  uint64_t heap_address = 0;
};

// The object header at `header_address` in `path` (a file of `file_bytes`): no shared message (one kept
// elsewhere, which libhdf5 would follow), every attribute message's name, datatype, dataspace and value
// inside the message, and every chunked layout message's chunk dimensions inside the message and nonzero. OK,
// or an error naming the file, the object and what is damaged. A version-2 header ("OHDR") is not checked.
// With `symbol_table`, also where the object's links are when it is a group (h5/group_check.h walks them),
// else nullopt.
absl::Status check_object_header(const std::string& path, int64_t file_bytes, uint64_t header_address,
                                 const std::string& object_path,
                                 std::optional<SymbolTable>* symbol_table = nullptr);

}  // namespace nanoforge
