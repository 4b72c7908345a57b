// choose_kernels for a recipe: its keys as step/kernel_choice.h's request.
#include "train/kernel_choice.h"

namespace nanoforge {

absl::StatusOr<ChosenKernels> choose_kernels(const Recipe& recipe, Device device, const GPTConfig& model) {
  return choose_kernels(KernelRequest{.attention = recipe.model.attention,
                                      .mlp_gemm = recipe.model.mlp_gemm,
                                      .fp8 = recipe.model.fp8,
                                      .fp8_recipe = recipe.model.fp8_recipe,
                                      .deterministic = recipe.train.deterministic,
                                      .batch = recipe.train.device_batch_size},
                        device, model);
}

}  // namespace nanoforge
