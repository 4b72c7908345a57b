// libhdf5 1.10 decodes an attribute message without checking that the value it copies fits in the message:
// a damaged name, datatype or dataspace size makes it read past its buffer (fuzzing found this in shards and
// checkpoints within seconds). check_attribute_messages reads an object header's bytes itself — version 1,
// as nanoforge and h5py write them, following its continuation chunks — and checks every attribute message's
// parts against the message's size before libhdf5 looks at any of them. docs/fuzzing.md lists what such
// checks do not cover.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

namespace nanoforge {

// The attribute messages of the object header at `header_address` in `path` (a file of `file_bytes`), or
// an error naming the file, the object and what is damaged. A version-2 header ("OHDR") is not checked.
absl::Status check_attribute_messages(const std::string& path, int64_t file_bytes, uint64_t header_address,
                                      const std::string& object_path);

}  // namespace nanoforge
