// Reading datasets and attributes of an untrusted file. Before an object is read its class, size and extent
// are checked against what the caller expects and what the file can hold, and its header's attribute
// messages and its storage against what libhdf5 would otherwise trust (h5/header_check.h,
// h5/dataset_check.h).
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include "h5/dataset_check.h"
#include "h5/file.h"
#include "h5/hdf5_api.h"
#include "h5/header_check.h"
#include "support/status.h"

namespace nanoforge {

using h5_api::Handle;
using h5_api::innermost_hdf5_error;
using h5_api::memory_type;

namespace {

template <class T>
H5T_class_t expected_class() {
  return std::is_floating_point_v<T> ? H5T_FLOAT : H5T_INTEGER;
}

const char* class_name(H5T_class_t type_class) {
  switch (type_class) {
    case H5T_INTEGER:
      return "integer";
    case H5T_FLOAT:
      return "floating point";
    case H5T_STRING:
      return "string";
    default:
      return "non-numeric";
  }
}

// The shape of a dataset's or attribute's dataspace and its element count, refused when the dataspace is
// unreadable, null, of a rank above HDF5's 32, or its count overflows.
struct Extent {
  std::vector<int64_t> shape;  // empty for a scalar
  int64_t count = 0;
};

absl::StatusOr<Extent> extent_of(hid_t space, const std::string& what) {
  if (space < 0)
    return absl::DataLossError(fmt::format("{}: cannot read its dataspace (corrupt file?)", what));
  Extent extent;
  switch (H5Sget_simple_extent_type(space)) {
    case H5S_SCALAR:
      extent.count = 1;
      return extent;
    case H5S_SIMPLE:
      break;
    default:
      return absl::InvalidArgumentError(fmt::format("{}: holds no data (a null dataspace)", what));
  }
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1 || rank > H5S_MAX_RANK) {
    return absl::DataLossError(fmt::format("{}: dataspace of rank {} (corrupt file?)", what, rank));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0)
    return absl::DataLossError(fmt::format("{}: cannot read its dimensions (corrupt file?)", what));
  extent.count = 1;
  for (const hsize_t dim : dims) {
    const auto limit = static_cast<hsize_t>(std::numeric_limits<int64_t>::max());
    if (dim > limit || (dim > 0 && static_cast<hsize_t>(extent.count) > limit / dim)) {
      return absl::DataLossError(fmt::format(
          "{}: dimensions ({}) overflow a 64-bit element count (corrupt file)", what, fmt::join(dims, ", ")));
    }
    extent.count *= static_cast<int64_t>(dim);
    extent.shape.push_back(static_cast<int64_t>(dim));
  }
  return extent;
}

// Refuses an attribute of `count` elements of `element_bytes` each when they cannot lie in a file of
// `file_bytes`, before anything is allocated for them (datasets: check_dataset_storage).
absl::Status check_fits_file(int64_t count, int64_t element_bytes, int64_t file_bytes,
                             const std::string& what) {
  if (element_bytes < 1)
    return absl::DataLossError(fmt::format("{}: elements of {} bytes (corrupt file)", what, element_bytes));
  if (count > file_bytes / element_bytes) {
    return absl::DataLossError(
        fmt::format("{}: claims {} elements of {} bytes, more than the file's {} bytes can hold (corrupt or "
                    "truncated file)",
                    what, count, element_bytes, file_bytes));
  }
  return absl::OkStatus();
}

// The object header of `object_path`, checked (h5/header_check.h) before libhdf5 decodes its attribute or
// layout messages. Finding the header decodes neither.
absl::Status check_header_of(hid_t file, const std::string& file_path, int64_t file_bytes,
                             const std::string& object_path) {
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, object_path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read the object header of {} (corrupt file?)", file_path, object_path));
  }
  return check_object_header(file_path, file_bytes, info.addr, object_path);
}

}  // namespace

absl::StatusOr<H5File::DatasetLayout> H5File::dataset_layout(const std::string& dataset_path) const {
  if (!has(dataset_path))
    return absl::NotFoundError(fmt::format("{}: missing dataset {}", path_, dataset_path));
  // Opening decodes the layout message (and divides by its chunk dimensions): check the header first.
  NANOFORGE_RETURN_IF_ERROR(check_header_of(handle_, path_, file_bytes_, dataset_path));
  Handle dataset(H5Dopen2(handle_, dataset_path.c_str(), H5P_DEFAULT));
  if (!dataset.valid())
    return absl::InvalidArgumentError(fmt::format("{}: {} is not a dataset", path_, dataset_path));
  const std::string what = fmt::format("{}: dataset {}", path_, dataset_path);
  DatasetLayout layout;
  Handle space(H5Dget_space(dataset.get()));
  NANOFORGE_ASSIGN_OR_RETURN(const Extent extent, extent_of(space.get(), what));
  layout.shape = extent.shape;
  Handle type(H5Dget_type(dataset.get()));
  if (!type.valid())
    return absl::DataLossError(fmt::format("{}: cannot read its type (corrupt file?)", what));
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER:
      layout.value_class = DatasetLayout::ValueClass::kInteger;
      layout.is_signed = H5Tget_sign(type.get()) == H5T_SGN_2;
      break;
    case H5T_FLOAT:
      layout.value_class = DatasetLayout::ValueClass::kFloat;
      break;
    case H5T_STRING:
      layout.value_class = DatasetLayout::ValueClass::kString;
      break;
    default:
      layout.value_class = DatasetLayout::ValueClass::kOther;
  }
  layout.element_bytes = static_cast<int64_t>(H5Tget_size(type.get()));
  if (layout.value_class == DatasetLayout::ValueClass::kInteger ||
      layout.value_class == DatasetLayout::ValueClass::kFloat) {
    layout.is_little_endian = H5Tget_order(type.get()) == H5T_ORDER_LE;
  }
  if (layout.value_class == DatasetLayout::ValueClass::kInteger ||
      layout.value_class == DatasetLayout::ValueClass::kFloat) {
    NANOFORGE_RETURN_IF_ERROR(
        check_dataset_storage(dataset.get(), std::vector<uint64_t>(extent.shape.begin(), extent.shape.end()),
                              file_bytes_, path_, dataset_path));
  }
  Handle create_properties(H5Dget_create_plist(dataset.get()));
  layout.contiguous = H5Pget_layout(create_properties.get()) == H5D_CONTIGUOUS;
  if (layout.contiguous) {
    const haddr_t offset = H5Dget_offset(dataset.get());
    if (offset != HADDR_UNDEF) layout.file_offset = static_cast<int64_t>(offset);
  }
  return layout;
}

template <class T>
absl::StatusOr<HostArray<T>> H5File::read(const std::string& dataset_path) const {
  if (!has(dataset_path))
    return absl::NotFoundError(fmt::format("{}: missing dataset {}", path_, dataset_path));
  // Opening decodes the layout message (and divides by its chunk dimensions): check the header first.
  NANOFORGE_RETURN_IF_ERROR(check_header_of(handle_, path_, file_bytes_, dataset_path));
  Handle dataset(H5Dopen2(handle_, dataset_path.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) {
    return absl::InvalidArgumentError(fmt::format("{}: {} is not a dataset", path_, dataset_path));
  }
  const std::string what = fmt::format("{}: dataset {}", path_, dataset_path);
  Handle file_type(H5Dget_type(dataset.get()));
  const H5T_class_t stored_class = H5Tget_class(file_type.get());
  if (stored_class != expected_class<T>()) {
    return absl::InvalidArgumentError(fmt::format("{} holds {} values, expected {}", what,
                                                  class_name(stored_class), class_name(expected_class<T>())));
  }
  Handle space(H5Dget_space(dataset.get()));
  NANOFORGE_ASSIGN_OR_RETURN(const Extent extent, extent_of(space.get(), what));
  NANOFORGE_RETURN_IF_ERROR(
      check_dataset_storage(dataset.get(), std::vector<uint64_t>(extent.shape.begin(), extent.shape.end()),
                            file_bytes_, path_, dataset_path));
  HostArray<T> array;
  array.shape = extent.shape;
  array.values.resize(static_cast<size_t>(extent.count));
  if (extent.count > 0 &&
      H5Dread(dataset.get(), memory_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, array.values.data()) < 0) {
    const std::string cause = innermost_hdf5_error();
    return absl::DataLossError(fmt::format("{}: cannot read (truncated or corrupt file?){}", what,
                                           cause.empty() ? "" : ": HDF5 says " + cause));
  }
  return array;
}

template <class T>
absl::StatusOr<std::vector<T>> H5File::read_vector(const std::string& dataset_path, int64_t max_count) const {
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<T> array, read<T>(dataset_path));
  if (array.shape.size() != 1 || array.shape[0] < 1 || array.shape[0] > max_count) {
    return absl::InvalidArgumentError(
        fmt::format("{}: dataset {} has shape ({}); expected 1 to {} values in one dimension", path_,
                    dataset_path, fmt::join(array.shape, ", "), max_count));
  }
  return std::move(array.values);
}

namespace {

// An attribute of `object_path`, opened with its type and extent checked: `type_class`, elements of at most
// `max_element_bytes` bytes, a count that fits the file.
struct OpenedAttribute {
  Handle attribute{-1};
  Handle type{-1};
  Extent extent;
};

absl::Status open_attribute(hid_t file, const std::string& file_path, int64_t file_bytes,
                            const std::string& object_path, const std::string& name, H5T_class_t type_class,
                            const char* expected, OpenedAttribute& opened) {
  // libhdf5 decodes every attribute message of the object to find one: check them all first.
  NANOFORGE_RETURN_IF_ERROR(check_header_of(file, file_path, file_bytes, object_path));
  if (H5Aexists_by_name(file, object_path.c_str(), name.c_str(), H5P_DEFAULT) <= 0) {
    return absl::NotFoundError(fmt::format("{}: missing attribute {} on {}", file_path, name, object_path));
  }
  const std::string what = fmt::format("{}: attribute {} on {}", file_path, name, object_path);
  opened.attribute =
      Handle(H5Aopen_by_name(file, object_path.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT));
  if (!opened.attribute.valid())
    return absl::DataLossError(fmt::format("{}: cannot open (corrupt file?)", what));
  opened.type = Handle(H5Aget_type(opened.attribute.get()));
  if (!opened.type.valid() || H5Tget_class(opened.type.get()) != type_class)
    return absl::InvalidArgumentError(fmt::format("{} must be {}", what, expected));
  if (type_class == H5T_STRING && H5Tis_variable_str(opened.type.get()) != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{} is a variable-length string: nanoforge reads only fixed-length strings from HDF5 files, as "
        "libhdf5 can hang or crash reading variable-length data from a damaged file "
        "(docs/untrusted-input.md); "
        "rewrite its strings with python3 tools/upgrade_h5.py strings FILE",
        what));
  }
  // Numbers of a standard width only: libhdf5 converts custom widths and orders unchecked.
  if (type_class != H5T_STRING && !is_standard_number_type(opened.type.get()))
    return absl::InvalidArgumentError(fmt::format("{} must be {} of a standard type", what, expected));
  const auto element_bytes = static_cast<int64_t>(H5Tget_size(opened.type.get()));
  Handle space(H5Aget_space(opened.attribute.get()));
  NANOFORGE_ASSIGN_OR_RETURN(opened.extent, extent_of(space.get(), what));
  return check_fits_file(opened.extent.count, element_bytes, file_bytes, what);
}

template <class T>
absl::StatusOr<std::vector<T>> read_numeric_attribute(hid_t file, const std::string& file_path,
                                                      int64_t file_bytes, const std::string& object_path,
                                                      const std::string& name, bool single) {
  OpenedAttribute opened;
  const char* value_class = class_name(expected_class<T>());
  const std::string expected =
      single ? fmt::format("one {} value", value_class) : fmt::format("{} values", value_class);
  NANOFORGE_RETURN_IF_ERROR(open_attribute(file, file_path, file_bytes, object_path, name,
                                           expected_class<T>(), expected.c_str(), opened));
  if (single && opened.extent.count != 1) {
    return absl::InvalidArgumentError(fmt::format("{}: attribute {} on {} must be one {} value", file_path,
                                                  name, object_path, class_name(expected_class<T>())));
  }
  std::vector<T> values(static_cast<size_t>(opened.extent.count));
  if (!values.empty() && H5Aread(opened.attribute.get(), memory_type<T>(), values.data()) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read attribute {} on {}", file_path, name, object_path));
  }
  return values;
}

absl::StatusOr<std::vector<std::string>> read_fixed_strings(hid_t file, const std::string& file_path,
                                                            int64_t file_bytes,
                                                            const std::string& object_path,
                                                            const std::string& name, bool single) {
  OpenedAttribute opened;
  NANOFORGE_RETURN_IF_ERROR(open_attribute(file, file_path, file_bytes, object_path, name, H5T_STRING,
                                           single ? "a string" : "strings", opened));
  if (single && opened.extent.count != 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: attribute {} on {} must be one string", file_path, name, object_path));
  }
  const auto size = static_cast<size_t>(H5Tget_size(opened.type.get()));
  std::string bytes(size * static_cast<size_t>(opened.extent.count), '\0');
  Handle memory(H5Tcopy(opened.type.get()));
  if (!bytes.empty() && H5Aread(opened.attribute.get(), memory.get(), bytes.data()) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read attribute {} on {}", file_path, name, object_path));
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < static_cast<size_t>(opened.extent.count); ++i) {
    std::string value = bytes.substr(i * size, size);
    value.resize(std::min(value.find('\0'), value.size()));  // NUL-terminated or NUL-padded
    if (H5Tget_strpad(opened.type.get()) == H5T_STR_SPACEPAD) value.erase(value.find_last_not_of(' ') + 1);
    values.push_back(std::move(value));
  }
  return values;
}

}  // namespace

absl::StatusOr<int64_t> H5File::read_int_attribute(const std::string& object_path,
                                                   const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  NANOFORGE_ASSIGN_OR_RETURN(
      const std::vector<int64_t> values,
      read_numeric_attribute<int64_t>(handle_, path_, file_bytes_, object_path, name, true));
  return values[0];
}

absl::StatusOr<double> H5File::read_float_attribute(const std::string& object_path,
                                                    const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  NANOFORGE_ASSIGN_OR_RETURN(
      const std::vector<double> values,
      read_numeric_attribute<double>(handle_, path_, file_bytes_, object_path, name, true));
  return values[0];
}

absl::StatusOr<std::string> H5File::read_string_attribute(const std::string& object_path,
                                                          const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> values,
                             read_fixed_strings(handle_, path_, file_bytes_, object_path, name, true));
  return std::move(values[0]);
}

absl::StatusOr<std::vector<double>> H5File::read_float_array_attribute(const std::string& object_path,
                                                                       const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  return read_numeric_attribute<double>(handle_, path_, file_bytes_, object_path, name, false);
}

absl::StatusOr<std::vector<int64_t>> H5File::read_int_array_attribute(const std::string& object_path,
                                                                      const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  return read_numeric_attribute<int64_t>(handle_, path_, file_bytes_, object_path, name, false);
}

absl::StatusOr<std::vector<std::string>> H5File::read_string_array_attribute(const std::string& object_path,
                                                                             const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  return read_fixed_strings(handle_, path_, file_bytes_, object_path, name, false);
}

#define NANOFORGE_H5_INSTANTIATE(T)                                                \
  template absl::StatusOr<HostArray<T>> H5File::read<T>(const std::string&) const; \
  template absl::StatusOr<std::vector<T>> H5File::read_vector<T>(const std::string&, int64_t) const;
NANOFORGE_H5_ELEMENT_TYPES(NANOFORGE_H5_INSTANTIATE)
#undef NANOFORGE_H5_INSTANTIATE

}  // namespace nanoforge
