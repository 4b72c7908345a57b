// A small RAII layer over the HDF5 C API for the files nanoforge reads and writes (parity cases and
// results, checkpoints and token shards). Every failure comes back as an absl::Status that names the file and
// the dataset or attribute. Reading treats the file as untrusted: the superblock (h5/preflight.h), every
// attribute message and chunked layout (h5/header_check.h) and every dataset's type and storage
// (h5/dataset_check.h) are checked before libhdf5 decodes or reads them, every allocation is bounded by the
// file's size, and no variable-length data is read; strings are written with a fixed length.
// docs/untrusted-input.md says what this guarantees and what it does not.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/host_array.h"

namespace nanoforge {

// How H5File::write stores a dataset (outside the class: clang needs a nested struct's member initialisers
// complete before they serve as a default argument inside the class).
struct H5WriteOptions {
  // Store a Fletcher-32 checksum per chunk (the dataset becomes chunked); reads then fail on corruption
  // instead of returning wrong values. Scalars have no checksum.
  bool checksum = false;
};

class H5File {
 public:
  // Opens for reading after preflight_hdf5_file (h5/preflight.h) has passed.
  static absl::StatusOr<H5File> open_read(const std::string& path);
  // Creates (truncating) a file for writing.
  static absl::StatusOr<H5File> create(const std::string& path);
  // Same, with every object in the file starting at a multiple of `alignment_bytes` (H5Pset_alignment), so
  // that a contiguous dataset can be memory-mapped with its elements naturally aligned (token shards use a
  // page, 4096). 0 keeps HDF5's default packing.
  static absl::StatusOr<H5File> create(const std::string& path, int64_t alignment_bytes);

  H5File(H5File&& other) noexcept;
  H5File& operator=(H5File&& other) noexcept;
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;
  ~H5File();

  const std::string& path() const { return path_; }
  // Size of the file when it was opened for reading (0 for a file being written).
  int64_t file_bytes() const { return file_bytes_; }
  // Flushes and closes the file; the error HDF5 reports then (a write that failed late, e.g. a full disk).
  // The destructor closes without reporting: writers call close() before they trust what they wrote.
  absl::Status close();
  bool has(const std::string& object_path) const;
  // Names of the direct members of a group, in HDF5's (alphabetical) order.
  absl::StatusOr<std::vector<std::string>> members(const std::string& group_path) const;

  // How a dataset is stored: enough for a reader that maps the file's bytes instead of calling H5Dread.
  struct DatasetLayout {
    std::vector<int64_t> shape;
    enum class ValueClass { kInteger, kFloat, kString, kOther } value_class = ValueClass::kOther;
    int64_t element_bytes = 0;
    bool is_signed = false;         // integers only
    bool is_little_endian = false;  // numbers only
    bool contiguous = false;        // H5D_CONTIGUOUS layout (so no filters, no chunks)
    int64_t file_offset = -1;       // byte offset of the raw data in the file; -1 unless contiguous+allocated
  };
  absl::StatusOr<DatasetLayout> dataset_layout(const std::string& dataset_path) const;

  // Reads a dataset into T (float, double, int32_t, int64_t, uint8_t, uint16_t, uint32_t). The stored type
  // must be of the same class (floating point for float/double, integer for the integer types) and a standard
  // width; HDF5 converts the width. Refused before any allocation: storage that does not match the shape, or
  // more elements than the file can hold (check_dataset_storage).
  template <class T>
  absl::StatusOr<HostArray<T>> read(const std::string& dataset_path) const;
  // The same, for a 1-D dataset that must hold between 1 and `max_count` elements (e.g. a text or a scalar
  // written as one element): an error naming the dataset otherwise.
  template <class T>
  absl::StatusOr<std::vector<T>> read_vector(const std::string& dataset_path, int64_t max_count) const;

  absl::StatusOr<int64_t> read_int_attribute(const std::string& object_path, const std::string& name) const;
  absl::StatusOr<double> read_float_attribute(const std::string& object_path, const std::string& name) const;
  absl::StatusOr<std::string> read_string_attribute(const std::string& object_path,
                                                    const std::string& name) const;
  // One-dimensional attributes (a scalar reads as one element): numbers, or fixed-length strings (h5py:
  // numpy arrays of dtype "S"). Variable-length strings are refused with a message saying how to rewrite
  // them.
  absl::StatusOr<std::vector<double>> read_float_array_attribute(const std::string& object_path,
                                                                 const std::string& name) const;
  absl::StatusOr<std::vector<int64_t>> read_int_array_attribute(const std::string& object_path,
                                                                const std::string& name) const;
  absl::StatusOr<std::vector<std::string>> read_string_array_attribute(const std::string& object_path,
                                                                       const std::string& name) const;

  // Attach an attribute to an existing group or dataset ("/" is the file's root group). Strings are stored
  // as fixed-length UTF-8 (h5py reads them as bytes).
  absl::Status write_int_attribute(const std::string& object_path, const std::string& name, int64_t value);
  absl::Status write_string_attribute(const std::string& object_path, const std::string& name,
                                      const std::string& value);
  // Creates a group and any missing parents; an existing group is fine.
  absl::Status create_group(const std::string& group_path);

  using WriteOptions = H5WriteOptions;
  // Writes a dataset (contiguous unless checksummed), creating missing parent groups. An empty shape writes a
  // scalar.
  template <class T>
  absl::Status write(const std::string& dataset_path, const std::vector<int64_t>& shape, const T* values,
                     const WriteOptions& options = {});
  template <class T>
  absl::Status write(const std::string& dataset_path, const HostArray<T>& array,
                     const WriteOptions& options = {}) {
    return write(dataset_path, array.shape, array.values.data(), options);
  }

 private:
  H5File(std::string path, int64_t handle, int64_t file_bytes)
      : path_(std::move(path)), handle_(handle), file_bytes_(file_bytes) {}
  std::string path_;
  int64_t handle_ = -1;  // hid_t
  int64_t file_bytes_ = 0;
};

// Writes a new HDF5 file through `fill` under a temporary name (PATH.partial) and renames it into place only
// when every write and the close succeeded, so PATH is never a half-written file; on failure the temporary is
// removed.
absl::Status write_h5_atomically(const std::string& path, const std::function<absl::Status(H5File&)>& fill);

}  // namespace nanoforge
