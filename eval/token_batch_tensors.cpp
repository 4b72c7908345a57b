// TokenBatchTensors: one copy per row into the host buffers, then one upload of each to the GPU.
#include "eval/token_batch_tensors.h"

#include <algorithm>

#include "support/check.h"

namespace nanoforge {

TokenBatchTensors::TokenBatchTensors(int64_t batch_rows, int64_t sequence_length, Device device)
    : batch_rows_(batch_rows),
      sequence_length_(sequence_length),
      device_(device),
      ids_(static_cast<size_t>(batch_rows * sequence_length)),
      targets_(static_cast<size_t>(batch_rows * sequence_length)) {
  if (device_ != Device::kCpu) {
    device_buffer_ =
        DeviceBuffer(device_, 2 * batch_rows * sequence_length * static_cast<int64_t>(sizeof(int32_t)));
  }
}

void TokenBatchTensors::fill(const TokenBatch& batch) {
  NANOFORGE_CHECK(batch.batch_rows == batch_rows_ && batch.sequence_length == sequence_length_,
                  "batch ({}, {}) does not match the planned ({}, {})", batch.batch_rows,
                  batch.sequence_length, batch_rows_, sequence_length_);
  for (int64_t b = 0; b < batch_rows_; ++b) {
    std::ranges::copy(batch.inputs(b), ids_.begin() + b * sequence_length_);
    std::ranges::copy(batch.targets(b), targets_.begin() + b * sequence_length_);
  }
  if (device_ != Device::kCpu) {
    copy_from_host(ids(), ids_.data());
    copy_from_host(targets(), targets_.data());
  }
}

TensorView TokenBatchTensors::host_view(std::vector<int32_t>& values) {
  return TensorView(values.data(), {batch_rows_, sequence_length_}, DType::kI32, Device::kCpu);
}

TensorView TokenBatchTensors::ids() {
  if (device_ == Device::kCpu) return host_view(ids_);
  return TensorView(device_buffer_.data(), {batch_rows_, sequence_length_}, DType::kI32, device_);
}

TensorView TokenBatchTensors::targets() {
  if (device_ == Device::kCpu) return host_view(targets_);
  int32_t* base = static_cast<int32_t*>(device_buffer_.data());
  return TensorView(base + batch_rows_ * sequence_length_, {batch_rows_, sequence_length_}, DType::kI32,
                    device_);
}

}  // namespace nanoforge
