// Splits a loader batch of (B, T + 1) token rows into the model's (B, T) ids and targets (inputs row[:-1],
// targets row[1:]), in buffers allocated once: host vectors, and for a GPU model one device buffer the
// rows are copied into.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/loader/loader.h"
#include "kernels/device_buffer.h"
#include "kernels/tensor.h"

namespace nanoforge {

class TokenBatchTensors {
 public:
  TokenBatchTensors(int64_t batch_rows, int64_t sequence_length, Device device = Device::kCpu);
  void fill(const TokenBatch& batch);
  // On the model's device.
  TensorView ids();
  TensorView targets();
  std::span<const int32_t> target_values() const { return targets_; }  // on the host

 private:
  TensorView host_view(std::vector<int32_t>& values);
  int64_t batch_rows_, sequence_length_;
  Device device_;
  std::vector<int32_t> ids_, targets_;
  DeviceBuffer device_buffer_;  // ids then targets, for a GPU model
};

}  // namespace nanoforge
