// The datatype whitelist and the storage comparison of h5/dataset_check.h.
#include "h5/dataset_check.h"

#include <fmt/format.h>
#include <hdf5.h>

namespace nanoforge {
namespace {

constexpr int kMaxRank = 32;  // HDF5's limit

// The product of `values`, false on overflow.
template <class Extent>
bool product(const Extent* values, int count, uint64_t& result) {
  result = 1;
  for (int i = 0; i < count; ++i) {
    if (__builtin_mul_overflow(result, values[i], &result)) return false;
  }
  return true;
}

struct Filters {
  bool checksum = false;    // Fletcher-32
  bool compressed = false;  // deflate (with or without shuffle): chunks of any stored size
  bool unknown = false;
};

Filters filters_of(hid_t properties) {
  Filters filters;
  for (int i = 0; i < H5Pget_nfilters(properties); ++i) {
    unsigned flags = 0, config = 0;
    size_t values = 0;
    switch (
        H5Pget_filter2(properties, static_cast<unsigned>(i), &flags, &values, nullptr, 0, nullptr, &config)) {
      case H5Z_FILTER_FLETCHER32:
        filters.checksum = true;
        break;
      case H5Z_FILTER_DEFLATE:
      case H5Z_FILTER_SHUFFLE:
        filters.compressed = true;
        break;
      default:
        filters.unknown = true;
    }
  }
  return filters;
}

}  // namespace

bool is_standard_number_type(int64_t type) {
  for (const hid_t standard :
       {H5T_STD_I8LE,  H5T_STD_I8BE,   H5T_STD_U8LE,   H5T_STD_U8BE,   H5T_STD_I16LE,
        H5T_STD_I16BE, H5T_STD_U16LE,  H5T_STD_U16BE,  H5T_STD_I32LE,  H5T_STD_I32BE,
        H5T_STD_U32LE, H5T_STD_U32BE,  H5T_STD_I64LE,  H5T_STD_I64BE,  H5T_STD_U64LE,
        H5T_STD_U64BE, H5T_IEEE_F32LE, H5T_IEEE_F32BE, H5T_IEEE_F64LE, H5T_IEEE_F64BE}) {
    if (H5Tequal(type, standard) > 0) return true;
  }
  return false;
}

absl::Status check_dataset_storage(int64_t dataset, const std::vector<uint64_t>& dims, int64_t file_bytes,
                                   const std::string& file_path, const std::string& dataset_path) {
  auto damaged = [&](const std::string& what) {
    return absl::DataLossError(
        fmt::format("{}: dataset {} {} (corrupt file?)", file_path, dataset_path, what));
  };
  const hid_t type = H5Dget_type(dataset);
  const bool standard = is_standard_number_type(type);
  const uint64_t element = H5Tget_size(type);
  H5Tclose(type);
  if (!standard) return damaged("stores numbers of a type nanoforge does not read");
  const hid_t properties = H5Dget_create_plist(dataset);
  const Filters filters = filters_of(properties);
  const uint64_t file_size = static_cast<uint64_t>(file_bytes);
  const uint64_t most = filters.compressed ? kMaxDeflateRatio * file_size : file_size;
  uint64_t numel = 0, bytes = 0;
  absl::Status status;
  if (!product(dims.data(), static_cast<int>(dims.size()), numel) ||
      __builtin_mul_overflow(numel, element, &bytes) || bytes > most) {
    status = damaged(fmt::format("claims {} elements of {} bytes, more than the file ({} bytes{}) can hold",
                                 fmt::join(dims, " x "), element, file_bytes,
                                 filters.compressed ? ", compressed" : ""));
  } else if (filters.unknown) {
    status = damaged("uses a filter nanoforge does not read (only deflate, shuffle and Fletcher-32)");
  }
  const H5D_layout_t layout = H5Pget_layout(properties);
  if (status.ok() && (layout == H5D_COMPACT || layout == H5D_CONTIGUOUS)) {
    const uint64_t stored = H5Dget_storage_size(dataset);
    if (stored != bytes)
      status = damaged(fmt::format("stores {} bytes, its shape and type need {}", stored, bytes));
  } else if (status.ok() && layout == H5D_CHUNKED) {
    hsize_t chunk[kMaxRank];
    uint64_t chunk_bytes = 0, chunks_needed = 1;
    const int chunk_rank = H5Pget_chunk(properties, kMaxRank, chunk);
    if (chunk_rank != static_cast<int>(dims.size()) || !product(chunk, chunk_rank, chunk_bytes) ||
        chunk_bytes == 0 || __builtin_mul_overflow(chunk_bytes, element, &chunk_bytes) ||
        chunk_bytes > most) {
      status = damaged("has chunks that do not match its shape or could not fit in the file");
    }
    for (int d = 0; status.ok() && d < chunk_rank; ++d) {
      if (__builtin_mul_overflow(chunks_needed, (dims[d] + chunk[d] - 1) / chunk[d], &chunks_needed))
        status = damaged("has too many chunks");
    }
    // The chunk queries take the dataset's own dataspace (H5S_ALL is refused by libhdf5 1.10).
    const hid_t space = H5Dget_space(dataset);
    hsize_t chunks = 0;
    if (status.ok() && (H5Dget_num_chunks(dataset, space, &chunks) < 0 || chunks != chunks_needed))
      status = damaged(fmt::format("stores {} chunks, its shape needs {}", chunks, chunks_needed));
    const uint64_t stored_chunk_bytes = chunk_bytes + (filters.checksum ? 4 : 0);
    for (hsize_t c = 0; status.ok() && c < chunks; ++c) {
      hsize_t offset[kMaxRank];
      unsigned mask = 0;
      haddr_t address = 0;
      hsize_t size = 0;
      if (H5Dget_chunk_info(dataset, space, c, offset, &mask, &address, &size) < 0 || address > file_size ||
          size > file_size - address || (!filters.compressed && size != stored_chunk_bytes)) {
        status = damaged(
            fmt::format("has chunk {} of {} bytes, where its chunks hold {}", c, size, stored_chunk_bytes));
      }
    }
    H5Sclose(space);
  } else if (status.ok()) {
    status = damaged("has a storage layout nanoforge does not read");
  }
  H5Pclose(properties);
  return status;
}

}  // namespace nanoforge
