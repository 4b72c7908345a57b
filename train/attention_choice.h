// The recipe key model.attention (auto | cudnn | flash) turned into the ops' attention implementation for a
// run: auto takes cuDNN's fused attention where this build has it and the installed cuDNN supports every
// attention call of the run on this GPU (the frontend's own support check), else our flash attention; cudnn
// insists and fails, before the run starts, with cuDNN's reason. The trainer prints the line it returns.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "kernels/tensor.h"
#include "model/gpt_config.h"

namespace nanoforge {

inline constexpr const char* kAttentionSettings[] = {"auto", "cudnn", "flash"};

// The checks that need no GPU (recipe validation): a known value, and cudnn only where it can run at all
// (a build with cuDNN attention, and not train.device=cpu). Errors name the key.
absl::Status validate_attention_setting(const std::string& setting, const std::string& train_device);

// Resolves `setting` for a run of `model` on `device` with micro-batches of `batch` rows, sets
// ops::set_attention_implementation, and returns one line saying what was chosen and why.
absl::StatusOr<std::string> choose_attention(const std::string& setting, Device device,
                                             const GPTConfig& model, int64_t batch);

}  // namespace nanoforge
