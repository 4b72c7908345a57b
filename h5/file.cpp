// H5File's life: opening a file for reading once its bytes have passed the checks that keep libhdf5 from
// crashing on them (h5/preflight.h, h5/group_check.h), creating one for writing, closing it, and finding
// its objects. Reading objects is h5/file_read.cpp, writing them h5/file_write.cpp.
#include "h5/file.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <utility>

#include "h5/group_check.h"
#include "h5/hdf5_api.h"
#include "h5/preflight.h"
#include "support/status.h"

namespace nanoforge {

using h5_api::Handle;
using h5_api::hdf5_cause;
using h5_api::innermost_hdf5_error;
using h5_api::silence_hdf5_errors;

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

}  // namespace nanoforge
