// choose_kernels: the three choices, one KernelSettings, and the line that says what runs.
#include "train/kernel_choice.h"

#include <fmt/format.h>

#include "support/status.h"
#include "train/attention_choice.h"
#include "train/fp8_choice.h"
#include "train/mlp_gemm_choice.h"

namespace nanoforge {

absl::StatusOr<ChosenKernels> choose_kernels(const Recipe& recipe, Device device, const GPTConfig& model) {
  NANOFORGE_ASSIGN_OR_RETURN(const ChosenAttention attention,
                             choose_attention(recipe.model.attention, device, model,
                                              recipe.train.device_batch_size, recipe.train.deterministic));
  NANOFORGE_ASSIGN_OR_RETURN(const ChosenMlpGemm mlp_gemm,
                             choose_mlp_gemm(recipe.model.mlp_gemm, device, model));
  NANOFORGE_ASSIGN_OR_RETURN(const std::string fp8,
                             choose_fp8(recipe.model.fp8, recipe.model.fp8_recipe, device, model));
  ChosenKernels chosen;
  chosen.settings = {attention.implementation, mlp_gemm.gemm, recipe.train.deterministic, recipe.model.fp8};
  if (device ==
      Device::kCpu) {  // the GPU's attention and GEMM names mean nothing here; the CPU is deterministic
    chosen.lines = fmt::format("kernels: the CPU backend's ({}; {}), fp8 {}\n{}\n", attention.line,
                               mlp_gemm.line, recipe.model.fp8 ? "on" : "off", fp8);
  } else {
    chosen.lines = fmt::format("kernels: {} ({}; {})\n{}\n", chosen.settings.describe(), attention.line,
                               mlp_gemm.line, fp8);
  }
  return chosen;
}

}  // namespace nanoforge
