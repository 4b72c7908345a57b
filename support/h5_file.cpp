// HDF5 C API behind H5File. HDF5's own error stack printing is switched off: each failure is turned into one
// absl::Status naming the file and object instead.
#include "support/h5_file.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <type_traits>
#include <utility>

#include "support/h5_attribute_check.h"
#include "support/h5_dataset_check.h"
#include "support/status.h"

namespace nanoforge {
namespace {

void silence_hdf5_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

// The innermost description on HDF5's error stack (e.g. "truncated file: eof = 1000, ..., stored_eof =
// 5000"): the cause, where the outer entries only say which call failed. Empty when the stack is empty.
std::string innermost_hdf5_error() {
  std::string description;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* error, void* out) -> herr_t {
        if (error->desc != nullptr) *static_cast<std::string*>(out) = error->desc;
        return 0;
      },
      &description);
  return description;
}

// Closes an HDF5 handle of any kind when it goes out of scope.
class Handle {
 public:
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) H5Idec_ref(id_);
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  hid_t release() { return std::exchange(id_, -1); }

 private:
  hid_t id_;
};

template <class T>
hid_t memory_type() {
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  if constexpr (std::is_same_v<T, int32_t>) return H5T_NATIVE_INT32;
  if constexpr (std::is_same_v<T, int64_t>) return H5T_NATIVE_INT64;
  if constexpr (std::is_same_v<T, uint8_t>) return H5T_NATIVE_UINT8;
  if constexpr (std::is_same_v<T, uint16_t>) return H5T_NATIVE_UINT16;
  if constexpr (std::is_same_v<T, uint32_t>) return H5T_NATIVE_UINT32;
}

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

// Whether `dims` values of `element_bytes` each fit in a file of `file_bytes`: the bound on every attribute
// array and string read from a file (datasets: check_dataset_storage), checked before anything is allocated.
// An error naming the file and `what` otherwise.
absl::Status check_fits_in_file(const std::vector<hsize_t>& dims, size_t element_bytes, int64_t file_bytes,
                                const std::string& file_path, const std::string& what) {
  uint64_t bytes = element_bytes;
  bool overflow = false;
  for (const hsize_t extent : dims)
    overflow = overflow || __builtin_mul_overflow(bytes, extent, &bytes);
  if (overflow || bytes > static_cast<uint64_t>(file_bytes)) {
    return absl::DataLossError(
        fmt::format("{}: {} claims {} values of {} bytes, more than the whole file ({} bytes) holds "
                    "(corrupt file?)",
                    file_path, what, fmt::join(dims, " x "), element_bytes, file_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<H5File> H5File::open_read(const std::string& path, VariableLengthStrings strings) {
  silence_hdf5_errors();
  if (!std::filesystem::is_regular_file(path))
    return absl::NotFoundError(fmt::format("{}: no such file", path));
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return absl::InvalidArgumentError(fmt::format("{}: not an HDF5 file (truncated or wrong file?)", path));
  }
  std::error_code error;
  const uintmax_t file_bytes = std::filesystem::file_size(path, error);
  if (error) return absl::NotFoundError(fmt::format("{}: cannot read its size: {}", path, error.message()));
  hid_t handle = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (handle < 0) {
    const std::string cause = innermost_hdf5_error();
    return absl::DataLossError(fmt::format("{}: cannot open as HDF5 (truncated or corrupt?){}", path,
                                           cause.empty() ? "" : ": HDF5 says " + cause));
  }
  H5File file(path, handle);
  file.file_bytes_ = static_cast<int64_t>(file_bytes);
  file.variable_length_strings_ = strings;
  return file;
}

absl::StatusOr<H5File> H5File::create(const std::string& path) {
  return create(path, 0);
}

absl::StatusOr<H5File> H5File::create(const std::string& path, int64_t alignment_bytes) {
  silence_hdf5_errors();
  Handle access_properties(H5Pcreate(H5P_FILE_ACCESS));
  // Threshold 1: every allocation (raw data and metadata blocks alike) starts on the alignment.
  if (alignment_bytes > 0)
    H5Pset_alignment(access_properties.get(), 1, static_cast<hsize_t>(alignment_bytes));
  // No modification times in object headers (HDF5 records them by default): the same content gives the same
  // bytes, whenever it is written (prep's output is compared byte for byte across thread counts).
  Handle creation_properties(H5Pcreate(H5P_FILE_CREATE));
  H5Pset_obj_track_times(creation_properties.get(), 0);
  hid_t handle = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, creation_properties.get(), access_properties.get());
  if (handle < 0) {
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create HDF5 file (does the directory exist and is it writable?)", path));
  }
  return H5File(path, handle);
}

H5File::H5File(H5File&& other) noexcept
    : path_(std::move(other.path_)),
      handle_(other.handle_),
      file_bytes_(other.file_bytes_),
      variable_length_strings_(other.variable_length_strings_) {
  other.handle_ = -1;
}

H5File& H5File::operator=(H5File&& other) noexcept {
  if (this != &other) {
    if (handle_ >= 0) H5Fclose(handle_);
    path_ = std::move(other.path_);
    handle_ = other.handle_;
    file_bytes_ = other.file_bytes_;
    variable_length_strings_ = other.variable_length_strings_;
    other.handle_ = -1;
  }
  return *this;
}

H5File::~H5File() {
  if (handle_ >= 0) H5Fclose(handle_);
}

bool H5File::has(const std::string& object_path) const {
  // H5Lexists must be asked level by level: it fails when an intermediate group is missing.
  size_t position = 0;
  while (position != std::string::npos) {
    position = object_path.find('/', position + 1);
    std::string prefix = object_path.substr(0, position);
    if (prefix.empty() || prefix == "/") continue;
    if (H5Lexists(handle_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

absl::StatusOr<std::vector<std::string>> H5File::members(const std::string& group_path) const {
  if (!has(group_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, group_path));
  Handle group(H5Gopen2(handle_, group_path.c_str(), H5P_DEFAULT));
  if (!group.valid())
    return absl::InvalidArgumentError(fmt::format("{}: {} is not a group", path_, group_path));
  H5G_info_t info;
  if (H5Gget_info(group.get(), &info) < 0) {
    return absl::DataLossError(fmt::format("{}: cannot list group {} (corrupt file?)", path_, group_path));
  }
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t length =
        H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    std::string name(static_cast<size_t>(std::max<ssize_t>(length, 0)), '\0');
    if (length < 0 || H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                                         name.size() + 1, H5P_DEFAULT) < 0) {
      return absl::DataLossError(
          fmt::format("{}: cannot read the name of member {} of group {} ({} members; corrupt file?)", path_,
                      i, group_path, info.nlinks));
    }
    names.push_back(std::move(name));
  }
  return names;
}

absl::StatusOr<H5File::DatasetLayout> H5File::dataset_layout(const std::string& dataset_path) const {
  if (!has(dataset_path))
    return absl::NotFoundError(fmt::format("{}: missing dataset {}", path_, dataset_path));
  Handle dataset(H5Dopen2(handle_, dataset_path.c_str(), H5P_DEFAULT));
  if (!dataset.valid())
    return absl::InvalidArgumentError(fmt::format("{}: {} is not a dataset", path_, dataset_path));
  DatasetLayout layout;
  Handle space(H5Dget_space(dataset.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read the shape of dataset {} (corrupt file?)", path_, dataset_path));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  layout.shape.assign(dims.begin(), dims.end());
  Handle type(H5Dget_type(dataset.get()));
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
  Handle dataset(H5Dopen2(handle_, dataset_path.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) {
    return absl::InvalidArgumentError(fmt::format("{}: {} is not a dataset", path_, dataset_path));
  }
  Handle file_type(H5Dget_type(dataset.get()));
  H5T_class_t stored_class = H5Tget_class(file_type.get());
  if (stored_class != expected_class<T>()) {
    return absl::InvalidArgumentError(fmt::format("{}: dataset {} holds {} values, expected {}", path_,
                                                  dataset_path, class_name(stored_class),
                                                  class_name(expected_class<T>())));
  }
  Handle space(H5Dget_space(dataset.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read the shape of dataset {} (corrupt file?)", path_, dataset_path));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  NANOFORGE_RETURN_IF_ERROR(check_dataset_storage(
      dataset.get(), std::vector<uint64_t>(dims.begin(), dims.end()), file_bytes_, path_, dataset_path));
  HostArray<T> array;
  array.shape.assign(dims.begin(), dims.end());
  array.values.resize(static_cast<size_t>(array.numel()));
  if (H5Dread(dataset.get(), memory_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, array.values.data()) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read dataset {} (truncated or corrupt file?)", path_, dataset_path));
  }
  return array;
}

namespace {

absl::StatusOr<hid_t> open_attribute(hid_t file, const std::string& file_path, int64_t file_bytes,
                                     const std::string& object_path, const std::string& name) {
  // libhdf5 decodes every attribute message of the object to find one: check them all first.
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, object_path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read the object header of {} (corrupt file?)", file_path, object_path));
  }
  NANOFORGE_RETURN_IF_ERROR(check_attribute_messages(file_path, file_bytes, info.addr, object_path));
  if (H5Aexists_by_name(file, object_path.c_str(), name.c_str(), H5P_DEFAULT) <= 0) {
    return absl::NotFoundError(fmt::format("{}: missing attribute {} on {}", file_path, name, object_path));
  }
  return H5Aopen_by_name(file, object_path.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
}

template <class T>
absl::StatusOr<T> read_numeric_attribute(hid_t file, const std::string& file_path, int64_t file_bytes,
                                         const std::string& object_path, const std::string& name) {
  auto attribute_id = open_attribute(file, file_path, file_bytes, object_path, name);
  if (!attribute_id.ok()) return attribute_id.status();
  Handle attribute(*attribute_id);
  Handle type(H5Aget_type(attribute.get()));
  Handle space(H5Aget_space(attribute.get()));
  if (H5Tget_class(type.get()) != expected_class<T>() || !is_standard_number_type(type.get()) ||
      H5Sget_simple_extent_npoints(space.get()) != 1) {
    return absl::InvalidArgumentError(fmt::format("{}: attribute {} on {} must be one {} value", file_path,
                                                  name, object_path, class_name(expected_class<T>())));
  }
  T value{};
  if (H5Aread(attribute.get(), memory_type<T>(), &value) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read attribute {} on {}", file_path, name, object_path));
  }
  return value;
}

}  // namespace

absl::StatusOr<int64_t> H5File::read_int_attribute(const std::string& object_path,
                                                   const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  return read_numeric_attribute<int64_t>(handle_, path_, file_bytes_, object_path, name);
}

absl::StatusOr<double> H5File::read_float_attribute(const std::string& object_path,
                                                    const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  return read_numeric_attribute<double>(handle_, path_, file_bytes_, object_path, name);
}

absl::StatusOr<std::string> H5File::read_string_attribute(const std::string& object_path,
                                                          const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  auto attribute_id = open_attribute(handle_, path_, file_bytes_, object_path, name);
  if (!attribute_id.ok()) return attribute_id.status();
  Handle attribute(*attribute_id);
  Handle type(H5Aget_type(attribute.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) {
    return absl::InvalidArgumentError(
        fmt::format("{}: attribute {} on {} must be a string", path_, name, object_path));
  }
  if (H5Tis_variable_str(type.get()) > 0) {
    if (variable_length_strings_ != VariableLengthStrings::kTrust) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: attribute {} on {} is a variable-length string, which nanoforge reads only from files it "
          "trusts "
          "(libhdf5 cannot read a damaged one safely): re-create the file with this nanoforge, which writes "
          "fixed-length strings, or write the attribute as one (h5py: numpy.bytes_)",
          path_, name, object_path));
    }
    // h5py writes str attributes as variable-length strings.
    Handle memory(H5Tcopy(H5T_C_S1));
    H5Tset_size(memory.get(), H5T_VARIABLE);
    H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(attribute.get(), memory.get(), &text) < 0 || text == nullptr) {
      return absl::DataLossError(fmt::format("{}: cannot read attribute {} on {}", path_, name, object_path));
    }
    std::string value(text);
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(type.get());
  NANOFORGE_RETURN_IF_ERROR(check_fits_in_file({1}, size, file_bytes_, path_,
                                               fmt::format("string attribute {} on {}", name, object_path)));
  std::string value(size, '\0');
  Handle memory(H5Tcopy(type.get()));
  if (H5Aread(attribute.get(), memory.get(), value.data()) < 0) {
    return absl::DataLossError(fmt::format("{}: cannot read attribute {} on {}", path_, name, object_path));
  }
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

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
        fmt::format("{}: cannot write attribute {} on {}", file_path, name, object_path));
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
  // Fixed-length UTF-8, padded with NUL (an empty string takes one byte): read without the global heap.
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  return write_attribute(handle_, path_, object_path, name, type.get(), value.c_str());
}

namespace {

template <class T>
absl::StatusOr<std::vector<T>> read_numeric_array_attribute(hid_t file, const std::string& file_path,
                                                            int64_t file_bytes,
                                                            const std::string& object_path,
                                                            const std::string& name) {
  auto attribute_id = open_attribute(file, file_path, file_bytes, object_path, name);
  if (!attribute_id.ok()) return attribute_id.status();
  Handle attribute(*attribute_id);
  Handle type(H5Aget_type(attribute.get()));
  Handle space(H5Aget_space(attribute.get()));
  if (H5Tget_class(type.get()) != expected_class<T>() || !is_standard_number_type(type.get())) {
    return absl::InvalidArgumentError(fmt::format("{}: attribute {} on {} must hold {} values", file_path,
                                                  name, object_path, class_name(expected_class<T>())));
  }
  const hssize_t count = H5Sget_simple_extent_npoints(space.get());
  if (count < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read the shape of attribute {} on {}", file_path, name, object_path));
  }
  NANOFORGE_RETURN_IF_ERROR(check_fits_in_file({static_cast<hsize_t>(count)}, H5Tget_size(type.get()),
                                               file_bytes, file_path,
                                               fmt::format("attribute {} on {}", name, object_path)));
  std::vector<T> values(static_cast<size_t>(count));
  if (H5Aread(attribute.get(), memory_type<T>(), values.data()) < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read attribute {} on {}", file_path, name, object_path));
  }
  return values;
}

}  // namespace

absl::StatusOr<std::vector<double>> H5File::read_float_array_attribute(const std::string& object_path,
                                                                       const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  return read_numeric_array_attribute<double>(handle_, path_, file_bytes_, object_path, name);
}

absl::StatusOr<std::vector<int64_t>> H5File::read_int_array_attribute(const std::string& object_path,
                                                                      const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  return read_numeric_array_attribute<int64_t>(handle_, path_, file_bytes_, object_path, name);
}

absl::StatusOr<std::vector<std::string>> H5File::read_string_array_attribute(const std::string& object_path,
                                                                             const std::string& name) const {
  if (!has(object_path)) return absl::NotFoundError(fmt::format("{}: missing group {}", path_, object_path));
  auto attribute_id = open_attribute(handle_, path_, file_bytes_, object_path, name);
  if (!attribute_id.ok()) return attribute_id.status();
  Handle attribute(*attribute_id);
  Handle type(H5Aget_type(attribute.get()));
  Handle space(H5Aget_space(attribute.get()));
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: attribute {} on {} must be variable-length strings", path_, name, object_path));
  }
  if (variable_length_strings_ != VariableLengthStrings::kTrust) {
    return absl::InvalidArgumentError(
        fmt::format("{}: attribute {} on {} holds variable-length strings, which nanoforge reads only from "
                    "files it trusts",
                    path_, name, object_path));
  }
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points < 0) {
    return absl::DataLossError(
        fmt::format("{}: cannot read the shape of attribute {} on {}", path_, name, object_path));
  }
  NANOFORGE_RETURN_IF_ERROR(check_fits_in_file({static_cast<hsize_t>(points)}, sizeof(char*), file_bytes_,
                                               path_, fmt::format("attribute {} on {}", name, object_path)));
  const auto count = static_cast<size_t>(points);
  std::vector<char*> texts(count, nullptr);
  Handle memory(H5Tcopy(H5T_C_S1));
  H5Tset_size(memory.get(), H5T_VARIABLE);
  H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
  if (H5Aread(attribute.get(), memory.get(), texts.data()) < 0) {
    return absl::DataLossError(fmt::format("{}: cannot read attribute {} on {}", path_, name, object_path));
  }
  std::vector<std::string> values;
  for (char* text : texts) {
    values.emplace_back(text != nullptr ? text : "");
    H5free_memory(text);
  }
  return values;
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
    return absl::InternalError(
        fmt::format("{}: cannot create dataset {} (does it exist already?)", path_, dataset_path));
  }
  if (H5Dwrite(dataset.get(), memory_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
    return absl::DataLossError(fmt::format("{}: cannot write dataset {} (disk full?)", path_, dataset_path));
  }
  return absl::OkStatus();
}

absl::Status write_h5_atomically(const std::string& path, const std::function<absl::Status(H5File&)>& fill) {
  const std::string temporary = path + ".partial";
  absl::Status status;
  {
    absl::StatusOr<H5File> file = H5File::create(temporary);
    status = file.ok() ? fill(*file) : file.status();
  }  // closed (flushed) before the rename
  std::error_code error;
  if (status.ok()) {
    std::filesystem::rename(temporary, path, error);
    if (error)
      status =
          absl::InternalError(fmt::format("cannot rename {} to {}: {}", temporary, path, error.message()));
  }
  if (!status.ok()) std::filesystem::remove(temporary, error);
  return status;
}

#define NANOFORGE_H5_INSTANTIATE(T)                                                                 \
  template absl::StatusOr<HostArray<T>> H5File::read<T>(const std::string&) const;                  \
  template absl::Status H5File::write<T>(const std::string&, const std::vector<int64_t>&, const T*, \
                                         const WriteOptions&);
NANOFORGE_H5_INSTANTIATE(float)
NANOFORGE_H5_INSTANTIATE(double)
NANOFORGE_H5_INSTANTIATE(int32_t)
NANOFORGE_H5_INSTANTIATE(int64_t)
NANOFORGE_H5_INSTANTIATE(uint8_t)
NANOFORGE_H5_INSTANTIATE(uint16_t)
NANOFORGE_H5_INSTANTIATE(uint32_t)
#undef NANOFORGE_H5_INSTANTIATE

}  // namespace nanoforge
