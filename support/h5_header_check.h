// libhdf5 1.10 decodes some object-header messages without checking them, and damaged ones crash it before
// any query could look: an attribute message whose value does not fit in it makes it read past its buffer
// (fuzzing found this in shards and checkpoints within seconds), and a chunked layout message with a chunk
// dimension of 0 makes it divide by zero (SIGFPE) inside H5Dopen2 (fuzzing found this in model.h5).
// check_object_header reads an object header's bytes itself — version 1, as nanoforge and h5py write them,
// following its continuation chunks — and checks those messages before libhdf5 looks at any of them.
// docs/fuzzing.md lists what such checks do not cover.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

namespace nanoforge {

// The object header at `header_address` in `path` (a file of `file_bytes`): every attribute message's name,
// datatype, dataspace and value inside the message, and every chunked layout message's chunk dimensions
// inside the message and nonzero. OK, or an error naming the file, the object and what is damaged. A
// version-2 header ("OHDR") is not checked.
absl::Status check_object_header(const std::string& path, int64_t file_bytes, uint64_t header_address,
                                 const std::string& object_path);

}  // namespace nanoforge
