// TokenBatchTensors: one copy per row into the ids and targets buffers.
#include "train/token_batch_tensors.h"

#include <algorithm>

#include "support/check.h"

namespace nanoforge {

TokenBatchTensors::TokenBatchTensors(int64_t batch_rows, int64_t sequence_length)
    : batch_rows_(batch_rows),
      sequence_length_(sequence_length),
      ids_(static_cast<size_t>(batch_rows * sequence_length)),
      targets_(static_cast<size_t>(batch_rows * sequence_length)) {}

void TokenBatchTensors::fill(const TokenBatch& batch) {
  NANOFORGE_CHECK(batch.batch_rows == batch_rows_ && batch.sequence_length == sequence_length_,
                  "batch ({}, {}) does not match the planned ({}, {})", batch.batch_rows,
                  batch.sequence_length, batch_rows_, sequence_length_);
  for (int64_t b = 0; b < batch_rows_; ++b) {
    std::ranges::copy(batch.inputs(b), ids_.begin() + b * sequence_length_);
    std::ranges::copy(batch.targets(b), targets_.begin() + b * sequence_length_);
  }
}

TensorView TokenBatchTensors::ids() {
  return TensorView(ids_.data(), {batch_rows_, sequence_length_}, DType::kI32, Device::kCpu);
}

TensorView TokenBatchTensors::targets() {
  return TensorView(targets_.data(), {batch_rows_, sequence_length_}, DType::kI32, Device::kCpu);
}

}  // namespace nanoforge
