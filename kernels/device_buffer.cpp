// DeviceBuffer and ArenaAllocator. CPU memory is 256-byte aligned and zeroed; CUDA memory comes from the
// CUDA backend (kernels/cuda/memory.cu) when it is built. While a thread records its ops
// (kernels/op_recorder.h), its buffers are inaccessible reserved address space: views get distinct addresses,
// nothing is backed, and any access to one faults at once.
#include "kernels/device_buffer.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/op_recorder.h"

namespace nanoforge {
namespace {

struct DeviceAccounting {
  std::atomic<int64_t> in_use{0};
  std::atomic<int64_t> peak{0};
};

DeviceAccounting& accounting(Device device) {
  static DeviceAccounting per_device[2];
  return per_device[device == Device::kCpu ? 0 : 1];
}

void account(Device device, int64_t bytes) {
  DeviceAccounting& a = accounting(device);
  const int64_t now = a.in_use.fetch_add(bytes) + bytes;
  int64_t peak = a.peak.load();
  while (now > peak && !a.peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

int64_t device_bytes_in_use(Device device) {
  return accounting(device).in_use.load();
}

int64_t device_bytes_peak(Device device) {
  return accounting(device).peak.load();
}

DeviceBuffer::DeviceBuffer(Device device, int64_t bytes) : bytes_(bytes), device_(device) {
  NANOFORGE_CHECK(bytes >= 0, "negative allocation of {} bytes", bytes);
  if (bytes == 0) return;
  if (ops::op_recorder() != nullptr) {
    data_ = mmap(nullptr, static_cast<size_t>(bytes), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    NANOFORGE_CHECK(data_ != MAP_FAILED, "op recording: cannot reserve {:.3f} GB of address space",
                    bytes / 1e9);
    reserved_ = true;
    return;
  }
  account(device, bytes);
  if (device == Device::kCpu) {
    int64_t rounded = (bytes + ArenaAllocator::kAlignmentBytes - 1) / ArenaAllocator::kAlignmentBytes *
                      ArenaAllocator::kAlignmentBytes;
    data_ = std::aligned_alloc(ArenaAllocator::kAlignmentBytes, static_cast<size_t>(rounded));
    NANOFORGE_CHECK(data_ != nullptr, "out of host memory allocating {:.3f} GB", bytes / 1e9);
    std::memset(data_, 0, static_cast<size_t>(rounded));
  } else {
    data_ = cuda::allocate_zeroed(bytes);
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_),
      reserved_(std::exchange(other.reserved_, false)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
    reserved_ = std::exchange(other.reserved_, false);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  release();
}

void DeviceBuffer::release() {
  if (data_ == nullptr) return;
  if (reserved_) {
    munmap(data_, static_cast<size_t>(bytes_));
    data_ = nullptr;
    reserved_ = false;
    return;
  }
  account(device_, -bytes_);
  if (device_ == Device::kCpu) {
    std::free(data_);
  } else {
    cuda::free(data_);
  }
  data_ = nullptr;
}

TensorView ArenaAllocator::take(std::initializer_list<int64_t> shape, DType dtype) {
  return take(std::span<const int64_t>(shape.begin(), shape.size()), dtype);
}

TensorView ArenaAllocator::take(std::span<const int64_t> shape, DType dtype) {
  TensorView view(nullptr, shape, dtype, device_);
  int64_t offset = (used_bytes_ + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
  used_bytes_ = offset + view.bytes();
  if (!measuring()) {
    NANOFORGE_CHECK(used_bytes_ <= capacity_bytes_, "arena overflow: plan needs {} bytes, buffer has {}",
                    used_bytes_, capacity_bytes_);
    view.data = base_ + offset;
  }
  return view;
}

TensorView ArenaAllocator::take_bytes(int64_t bytes) {
  const int64_t element_bytes = dtype_bytes(default_dtype_);
  return take({(bytes + element_bytes - 1) / element_bytes});
}

void copy_from_host(TensorView dst, const void* src) {
  if (ops::op_recorder() != nullptr) return;  // recorded set-up moves nothing
  if (dst.device == Device::kCpu) {
    std::memcpy(dst.data, src, static_cast<size_t>(dst.bytes()));
  } else {
    cuda::copy_from_host(dst.data, src, dst.bytes());
  }
}

void copy_to_host(void* dst, TensorView src) {
  if (ops::op_recorder() != nullptr) return;
  if (src.device == Device::kCpu) {
    std::memcpy(dst, src.data, static_cast<size_t>(src.bytes()));
  } else {
    cuda::copy_to_host(dst, src.data, src.bytes());
  }
}

}  // namespace nanoforge
