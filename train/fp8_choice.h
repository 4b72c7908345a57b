// The recipe's FP8 keys (model.fp8, model.fp8_recipe: nanochat's base_train --fp8 / --fp8-recipe) checked and
// resolved for a run. nanochat only warns and trains in bf16 where FP8 cannot run; nanoforge refuses instead,
// so a run never silently differs from the recipe it names.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <string>

#include "kernels/tensor.h"
#include "model/gpt_config.h"

namespace nanoforge {

// model.fp8_recipe on its own: "tensorwise" (the one implemented); "rowwise" is refused saying so.
absl::Status validate_fp8_recipe(const std::string& recipe);

// For a run on `device`: refuses FP8 on a GPU without FP8 tensor cores (compute capability below 8.9), and
// returns the line the trainer prints, as base_train does ("fp8: tensorwise scaling, converted 145/158 ...").
absl::StatusOr<std::string> choose_fp8(bool fp8, const std::string& recipe, Device device,
                                       const GPTConfig& model);

}  // namespace nanoforge
