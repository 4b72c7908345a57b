// Validation bits per byte, nanochat's evaluate_bpb: the summed cross-entropy (nats) of the targets that have
// bytes, over ln 2 times their byte count; special tokens (0 bytes) are left out of both sums, so the number
// does not depend on the tokenizer and compares across vocabularies.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "data/loader/loader.h"
#include "model/gpt.h"

namespace nanoforge {

struct BitsPerByteSums {
  double nats = 0;               // cross-entropy of the counted targets
  int64_t bytes = 0;             // their bytes
  int64_t tokens = 0;            // targets seen
  double bits_per_byte() const;  // +inf when no bytes were seen, as nanochat
  // An error when no bytes were seen (the validation data holds no text): bits per byte would be +inf.
  absl::Status check_defined() const;
};

// Adds one forward pass's targets to `sums`: per-token losses and targets (N) with the tokenizer's bytes per
// id. Targets of -1 count nothing.
void add_bits_per_byte(std::span<const float> token_losses, std::span<const int32_t> targets,
                       std::span<const int32_t> token_bytes, BitsPerByteSums& sums);

// Runs `steps` batches of the (rewound) validation loader through the model's forward pass; `progress`, when
// given, is called after each with the batches done.
absl::StatusOr<BitsPerByteSums> evaluate_bits_per_byte(
    GPT& model, Loader& val_loader, int64_t steps, std::span<const int32_t> token_bytes,
    const std::function<void(int64_t done)>& progress = {});

}  // namespace nanoforge
