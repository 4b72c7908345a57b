// Owning device memory, and the bump allocator that carves one allocation into many TensorViews.
// Parameters, gradients and activations each live in one DeviceBuffer planned up front; ops then only see
// views, so nothing is allocated while a step runs.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "kernels/tensor.h"

namespace nanoforge {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` on `device`, zero-filled. Aborts with the size when the device is out of memory. While
  // this thread records its ops (kernels/op_recorder.h): reserves inaccessible address space instead.
  DeviceBuffer(Device device, int64_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void release();
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  Device device_ = Device::kCpu;
  bool reserved_ = false;  // address space only (op recording)
};

// Hands out consecutive, aligned views of one buffer. Constructed without a buffer it only measures: run a
// plan once to learn its size, allocate, then run the same plan again over the real buffer.
class ArenaAllocator {
 public:
  static constexpr int64_t kAlignmentBytes = 256;  // cuBLASLt and vector loads want aligned operands

  ArenaAllocator(Device device, DType default_dtype) : device_(device), default_dtype_(default_dtype) {}
  ArenaAllocator(const DeviceBuffer& buffer, DType default_dtype)
      : base_(static_cast<char*>(buffer.data())),
        capacity_bytes_(buffer.bytes()),
        device_(buffer.device()),
        default_dtype_(default_dtype) {}

  TensorView take(std::initializer_list<int64_t> shape) { return take(shape, default_dtype_); }
  TensorView take(std::initializer_list<int64_t> shape, DType dtype);
  TensorView take(std::span<const int64_t> shape) { return take(shape, default_dtype_); }
  TensorView take(std::span<const int64_t> shape, DType dtype);
  // A 1-D scratch view of the default dtype holding at least `bytes`.
  TensorView take_bytes(int64_t bytes);
  Device device() const { return device_; }
  DType dtype() const { return default_dtype_; }
  int64_t used_bytes() const { return used_bytes_; }
  bool measuring() const { return base_ == nullptr; }

 private:
  char* base_ = nullptr;
  int64_t capacity_bytes_ = 0;
  int64_t used_bytes_ = 0;
  Device device_;
  DType default_dtype_;
};

// Bytes held by live DeviceBuffers on `device`, and the most held at once since the process started (what
// a run's memory plan really took; benchmarks report it as peak memory).
int64_t device_bytes_in_use(Device device);
int64_t device_bytes_peak(Device device);

// Copies between host memory and a tensor on any device (a plain memcpy on the CPU).
void copy_from_host(TensorView dst, const void* src);
void copy_to_host(void* dst, TensorView src);

}  // namespace nanoforge
