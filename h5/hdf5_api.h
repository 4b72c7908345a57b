// The libhdf5 plumbing that h5/file.cpp, h5/file_read.cpp and h5/file_write.cpp share (private to h5/):
// handles that close themselves, HDF5's own error printing switched off, and the cause of a failure read
// from HDF5's error stack for a message.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

// The element types H5File reads and writes: X(T) once for each (file_read.cpp and file_write.cpp instantiate
// their templates over this one list).
#define NANOFORGE_H5_ELEMENT_TYPES(X) \
  X(float) X(double) X(int32_t) X(int64_t) X(uint8_t) X(uint16_t) X(uint32_t)

namespace nanoforge::h5_api {

// Also keeps libhdf5 from closing what is still open when the process exits: nanoforge closes every file it
// writes (H5File::close), and a file whose close failed (a full disk) made libhdf5's shutdown crash. libhdf5
// keeps its error-printing setting per thread (Debian builds it thread-safe), so each thread that opens or
// creates a file silences its own (checkpoints are written on a background thread).
void silence_hdf5_errors();

// The innermost description on HDF5's error stack (e.g. "truncated file: eof = 1000, ..., stored_eof =
// 5000"): the cause, where the outer entries only say which call failed. Empty when the stack is empty.
std::string innermost_hdf5_error();

// The cause of the last failure for a message: ": CAUSE", the system's error message when HDF5 recorded one
// (a write that failed: "No space left on device"), else its innermost description; "" when there is none.
std::string hdf5_cause();

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

}  // namespace nanoforge::h5_api
