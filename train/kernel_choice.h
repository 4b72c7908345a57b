// A run's kernels, chosen once from the recipe and the device before the run directory is touched (a cuDNN
// that refuses the run's attention stops it, nothing written): attention (attention_choice.h), the MLP GEMM
// (mlp_gemm_choice.h) and FP8 (fp8_choice.h), with the lines rank 0 prints. The CPU backend has one attention
// and one GEMM, so a CPU run's line names no GPU kernel.
#pragma once

#include <absl/status/statusor.h>

#include <string>

#include "kernels/kernel_settings.h"
#include "kernels/tensor.h"
#include "model/gpt_config.h"
#include "train/recipe.h"

namespace nanoforge {

struct ChosenKernels {
  ops::KernelSettings settings;
  std::string lines;  // "kernels: ..." and "fp8: ...", each ending in a newline
};

absl::StatusOr<ChosenKernels> choose_kernels(const Recipe& recipe, Device device, const GPTConfig& model);

}  // namespace nanoforge
