// Writing a file nanoforge trusts: groups, fixed-length attributes and datasets, with no modification times
// so the same content gives the same bytes, and a whole file written under a temporary name and renamed
// into place.
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "h5/file.h"
#include "h5/hdf5_api.h"
#include "support/output_path.h"
#include "support/status.h"

namespace nanoforge {

using h5_api::Handle;
using h5_api::hdf5_cause;
using h5_api::memory_type;

absl::Status H5File::create_group(const std::string& group_path) {
  if (has(group_path)) return absl::OkStatus();
  Handle link_properties(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(link_properties.get(), 1);
  Handle group_properties(H5Pcreate(H5P_GROUP_CREATE));
  H5Pset_obj_track_times(group_properties.get(), 0);  // reproducible bytes, as in create()
  Handle group(
      H5Gcreate2(handle_, group_path.c_str(), link_properties.get(), group_properties.get(), H5P_DEFAULT));
  if (!group.valid())
    return absl::InternalError(fmt::format("{}: cannot create group {}", path_, group_path));
  return absl::OkStatus();
}

namespace {

// Writes one scalar attribute of `type` from `value` on object_path.
absl::Status write_attribute(hid_t file, const std::string& file_path, const std::string& object_path,
                             const std::string& name, hid_t type, const void* value) {
  Handle object(H5Oopen(file, object_path.c_str(), H5P_DEFAULT));
  if (!object.valid())
    return absl::NotFoundError(
        fmt::format("{}: no object {} for attribute {}", file_path, object_path, name));
  if (H5Aexists(object.get(), name.c_str()) > 0) H5Adelete(object.get(), name.c_str());
  Handle space(H5Screate(H5S_SCALAR));
  Handle attribute(H5Acreate2(object.get(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attribute.valid() || H5Awrite(attribute.get(), type, value) < 0) {
    return absl::InternalError(
        fmt::format("{}: cannot write attribute {} on {}{}", file_path, name, object_path, hdf5_cause()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status H5File::write_int_attribute(const std::string& object_path, const std::string& name,
                                         int64_t value) {
  return write_attribute(handle_, path_, object_path, name, H5T_NATIVE_INT64, &value);
}

absl::Status H5File::write_string_attribute(const std::string& object_path, const std::string& name,
                                            const std::string& value) {
  // Fixed-length UTF-8, NUL-padded (an empty string takes one byte): stored in the attribute itself, so a
  // reader never goes through libhdf5's global heap.
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  return write_attribute(handle_, path_, object_path, name, type.get(), padded.data());
}

namespace {

// Dataset creation properties for a checksummed dataset: chunked (filters need chunks) with Fletcher-32.
// Chunks hold whole rows and at most kMaxChunkBytes (HDF5's chunk limit is 4 GB).
hid_t checksummed_layout(const std::vector<hsize_t>& dims, size_t element_bytes) {
  constexpr hsize_t kMaxChunkBytes = hsize_t{256} << 20;
  Handle properties(H5Pcreate(H5P_DATASET_CREATE));
  std::vector<hsize_t> chunk = dims;
  hsize_t row_bytes = element_bytes;
  for (size_t i = 1; i < dims.size(); ++i)
    row_bytes *= std::max<hsize_t>(dims[i], 1);
  chunk[0] =
      std::clamp<hsize_t>(kMaxChunkBytes / std::max<hsize_t>(row_bytes, 1), 1, std::max<hsize_t>(dims[0], 1));
  for (hsize_t& extent : chunk)
    extent = std::max<hsize_t>(extent, 1);
  H5Pset_chunk(properties.get(), static_cast<int>(chunk.size()), chunk.data());
  H5Pset_fletcher32(properties.get());
  return properties.release();
}

}  // namespace

template <class T>
absl::Status H5File::write(const std::string& dataset_path, const std::vector<int64_t>& shape,
                           const T* values, const WriteOptions& options) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(shape.empty() ? H5Screate(H5S_SCALAR)
                             : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle link_properties(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(link_properties.get(), 1);
  const bool checksum =
      options.checksum && !shape.empty();  // HDF5 filters need a chunked (non-scalar) dataset
  Handle creation(checksum ? checksummed_layout(dims, sizeof(T)) : H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_obj_track_times(creation.get(), 0);  // reproducible bytes, as in create()
  Handle dataset(H5Dcreate2(handle_, dataset_path.c_str(), memory_type<T>(), space.get(),
                            link_properties.get(), creation.get(), H5P_DEFAULT));
  if (!dataset.valid()) {
    return absl::InternalError(fmt::format("{}: cannot create dataset {} (does it exist already?){}", path_,
                                           dataset_path, hdf5_cause()));
  }
  if (H5Dwrite(dataset.get(), memory_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot write dataset {} (disk full?){}", path_, dataset_path, hdf5_cause()));
  }
  return absl::OkStatus();
}

absl::Status write_h5_atomically(const std::string& path, const std::function<absl::Status(H5File&)>& fill) {
  NANOFORGE_RETURN_IF_ERROR(check_output_file_path(path));
  const std::string temporary = path + ".partial";
  absl::Status status;
  {
    absl::StatusOr<H5File> file = H5File::create(temporary);
    status = file.ok() ? fill(*file) : file.status();
    if (file.ok()) {
      const absl::Status closed = file->close();  // flushed before the rename
      if (status.ok()) status = closed;
    }
  }
  if (status.ok()) status = rename_into_place(temporary, path);
  std::error_code error;
  if (!status.ok()) std::filesystem::remove(temporary, error);
  return status;
}

#define NANOFORGE_H5_INSTANTIATE(T)                                                                 \
  template absl::Status H5File::write<T>(const std::string&, const std::vector<int64_t>&, const T*, \
                                         const WriteOptions&);
NANOFORGE_H5_ELEMENT_TYPES(NANOFORGE_H5_INSTANTIATE)
#undef NANOFORGE_H5_INSTANTIATE

}  // namespace nanoforge
