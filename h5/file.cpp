// HDF5 C API behind H5File. HDF5's own error stack printing is switched off: each failure is turned into one
// absl::Status naming the file and object instead. Before an object is read its class, size and extent are
// checked against what the caller expects and what the file can hold, and its header's attribute messages
// and its storage against what libhdf5 would otherwise trust (h5/header_check.h, h5/dataset_check.h).
#include "h5/file.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>

#include "h5/dataset_check.h"
#include "h5/group_check.h"
#include "h5/header_check.h"
#include "h5/preflight.h"
#include "support/output_path.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// Also keeps libhdf5 from closing what is still open when the process exits: nanoforge closes every file it
// writes (H5File::close), and a file whose close failed (a full disk) made libhdf5's shutdown crash. libhdf5
// keeps its error-printing setting per thread (Debian builds it thread-safe), so each thread that opens or
// creates a file silences its own (checkpoints are written on a background thread).
void silence_hdf5_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5dont_atexit(); });
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
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

// The cause of the last failure for a message: ": CAUSE", the system's error message when HDF5 recorded one
// (a write that failed: "No space left on device"), else its innermost description; "" when there is none.
std::string hdf5_cause() {
  const std::string description = innermost_hdf5_error();
  const std::string marker = "error message = '";
  const size_t at = description.find(marker);
  if (at != std::string::npos) {
    const size_t end = description.find('\'', at + marker.size());
    return ": " +
           description.substr(at + marker.size(), end == std::string::npos ? end : end - at - marker.size());
  }
  return description.empty() ? "" : ": HDF5 says " + description;
}

// Closes an HDF5 handle of any kind when it goes out of scope.
class Handle {
 public:
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& other) noexcept : id_(other.release()) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      if (id_ >= 0) H5Idec_ref(id_);
      id_ = other.release();
    }
    return *this;
  }
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

absl::StatusOr<H5File> H5File::open_read(const std::string& path) {
  silence_hdf5_errors();
  NANOFORGE_ASSIGN_OR_RETURN(const Hdf5Superblock superblock, preflight_hdf5_file(path));
  const int64_t file_bytes = superblock.file_bytes;
  // Before libhdf5 reads any group: it follows a loop in one without end (h5/group_check.h).
  NANOFORGE_RETURN_IF_ERROR(check_group_tree(path, file_bytes, superblock.root_header_address));
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return absl::InvalidArgumentError(fmt::format("{}: not an HDF5 file (truncated or wrong file?)", path));
  }
  hid_t handle = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (handle < 0) {
    const std::string cause = innermost_hdf5_error();
    return absl::DataLossError(fmt::format("{}: cannot open as HDF5 (truncated or corrupt?){}", path,
                                           cause.empty() ? "" : ": HDF5 says " + cause));
  }
  return H5File(path, handle, file_bytes);
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
    return absl::PermissionDeniedError(fmt::format(
        "{}: cannot create HDF5 file (does the directory exist and is it writable?){}", path, hdf5_cause()));
  }
  return H5File(path, handle, 0);
}

H5File::H5File(H5File&& other) noexcept
    : path_(std::move(other.path_)), handle_(other.handle_), file_bytes_(other.file_bytes_) {
  other.handle_ = -1;
}

H5File& H5File::operator=(H5File&& other) noexcept {
  if (this != &other) {
    close().IgnoreError();
    path_ = std::move(other.path_);
    handle_ = other.handle_;
    file_bytes_ = other.file_bytes_;
    other.handle_ = -1;
  }
  return *this;
}

H5File::~H5File() {
  close().IgnoreError();
}

absl::Status H5File::close() {
  if (handle_ < 0) return absl::OkStatus();
  const hid_t handle = std::exchange(handle_, -1);
  if (H5Fclose(handle) >= 0) return absl::OkStatus();
  // A failed close leaves the file open inside libhdf5; the library's shutdown at exit, which would retry it
  // and can crash doing so, is switched off (silence_hdf5_errors).
  return absl::DataLossError(fmt::format(
      "{}: writing the file failed when it was closed (disk full or failing?){}", path_, hdf5_cause()));
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
  // Every link takes a few bytes of the file at least: a count beyond its size is damage, not a group.
  if (info.nlinks > static_cast<hsize_t>(std::max<int64_t>(file_bytes_, 1))) {
    return absl::DataLossError(
        fmt::format("{}: group {} claims {} members, more than the file's {} bytes hold "
                    "(corrupt file)",
                    path_, group_path, info.nlinks, file_bytes_));
  }
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t length =
        H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (length < 1 || length > file_bytes_) {
      return absl::DataLossError(fmt::format(
          "{}: cannot read the name of member {} of group {} (corrupt file?)", path_, i, group_path));
    }
    std::string name(static_cast<size_t>(length), '\0');
    if (H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size() + 1,
                           H5P_DEFAULT) != length) {
      return absl::DataLossError(fmt::format(
          "{}: cannot read the name of member {} of group {} (corrupt file?)", path_, i, group_path));
    }
    names.push_back(std::move(name));
  }
  return names;
}

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

#define NANOFORGE_H5_INSTANTIATE(T)                                                                  \
  template absl::StatusOr<HostArray<T>> H5File::read<T>(const std::string&) const;                   \
  template absl::StatusOr<std::vector<T>> H5File::read_vector<T>(const std::string&, int64_t) const; \
  template absl::Status H5File::write<T>(const std::string&, const std::vector<int64_t>&, const T*,  \
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
