// GPTConfig in an HDF5 file: attributes of the /config group, named as nanochat's GPTConfig fields
// (sequence_len, vocab_size, n_layer, n_head, n_kv_head, n_embd, window_pattern). Checkpoints, parity cases
// and optimizer goldens all store a model this way.
#pragma once

#include <absl/status/statusor.h>

#include "h5/file.h"
#include "model/gpt_config.h"

namespace nanoforge {

// Reads /config and validates it; errors name the file.
absl::StatusOr<GPTConfig> read_gpt_config(const H5File& file);

// Creates /config with every field.
absl::Status write_gpt_config(H5File& file, const GPTConfig& config);

}  // namespace nanoforge
