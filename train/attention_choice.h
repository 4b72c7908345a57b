// The recipe key model.attention (auto | cudnn | flash) turned into the attention implementation of a run's
// KernelSettings: auto takes cuDNN's fused attention where this build has it and the installed cuDNN supports
// every attention call of the run on this GPU (the frontend's own support check), else our flash attention;
// cudnn insists and fails, before the run starts, with cuDNN's reason. The trainer prints the line.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "kernels/attention_implementation.h"
#include "kernels/tensor.h"
#include "model/gpt_config.h"

namespace nanoforge {

inline constexpr const char* kAttentionSettings[] = {"auto", "cudnn", "flash"};

// The checks that need no GPU (recipe validation): a known value, and cudnn only where it can run at all
// (a build with cuDNN attention, and not train.device=cpu). Errors name the key.
absl::Status validate_attention_setting(const std::string& setting, const std::string& train_device);

struct ChosenAttention {
  ops::AttentionImplementation implementation = ops::AttentionImplementation::kFlash;
  std::string line;  // what was chosen and why: "attention: flash (model.attention=flash)"
};

// Resolves `setting` for a run of `model` on `device` with micro-batches of `batch` rows (`deterministic`:
// the backward cuDNN's support is checked for).
absl::StatusOr<ChosenAttention> choose_attention(const std::string& setting, Device device,
                                                 const GPTConfig& model, int64_t batch, bool deterministic);

}  // namespace nanoforge
