// Splits a loader batch of (B, T + 1) token rows into the model's (B, T) ids and targets (inputs row[:-1],
// targets row[1:]), in host buffers allocated once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/loader.h"
#include "kernels/tensor.h"

namespace nanoforge {

class TokenBatchTensors {
 public:
  TokenBatchTensors(int64_t batch_rows, int64_t sequence_length);
  void fill(const TokenBatch& batch);
  TensorView ids();
  TensorView targets();
  std::span<const int32_t> target_values() const { return targets_; }

 private:
  int64_t batch_rows_, sequence_length_;
  std::vector<int32_t> ids_, targets_;
};

}  // namespace nanoforge
