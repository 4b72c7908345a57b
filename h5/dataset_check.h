// libhdf5 1.10 trusts a dataset's datatype, layout and chunk sizes as the file states them, and copies past
// its buffers when they disagree with each other (fuzzing found a float of 223 bytes read through a chunk of
// 2,308, and a compact dataset of 104 bytes that stored none). These checks compare them through libhdf5's
// own queries, which only decode the messages, before H5Dread or H5Aread is asked to convert anything, and
// bound what a read would allocate by the file's size.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge {

// Whether `type` (an hid_t) is one of the types nanoforge reads numbers as: the standard signed or unsigned
// integers of 1, 2, 4 or 8 bytes, or IEEE floats of 4 or 8 bytes, in either byte order.
bool is_standard_number_type(int64_t type);

// deflate's largest compression ratio: a compressed dataset never holds more than this times its file.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

// That `dataset` (an hid_t) of shape `dims` holds standard numbers and stores exactly what its shape needs:
// compact and contiguous data of that size, at most the file's size; chunked data in every chunk, inside
// the file, each of the chunk's size plus its Fletcher-32 checksum when uncompressed, or, with deflate
// (and shuffle), at most kMaxDeflateRatio times the file in all. Other filters and layouts are refused. An
// error naming the file and the dataset otherwise.
absl::Status check_dataset_storage(int64_t dataset, const std::vector<uint64_t>& dims, int64_t file_bytes,
                                   const std::string& file_path, const std::string& dataset_path);

}  // namespace nanoforge
