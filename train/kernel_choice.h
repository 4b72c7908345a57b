// The trainer's kernel choice: the recipe's kernel keys and micro-batch rows as a KernelRequest, chosen by
// step/kernel_choice.h before the run directory is touched (a cuDNN that refuses the run's attention stops
// it, nothing written).
#pragma once

#include <absl/status/statusor.h>

#include "kernels/tensor.h"
#include "model/gpt_config.h"
#include "step/kernel_choice.h"
#include "train/recipe.h"

namespace nanoforge {

absl::StatusOr<ChosenKernels> choose_kernels(const Recipe& recipe, Device device, const GPTConfig& model);

}  // namespace nanoforge
