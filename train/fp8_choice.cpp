// model.fp8 for a run: the recipe name, the GPU's FP8 tensor cores, and base_train's line of what converts.
#include "train/fp8_choice.h"

#include <fmt/format.h>

#include "kernels/device.h"
#include "model/fp8_linears.h"

namespace nanoforge {

absl::Status validate_fp8_recipe(const std::string& recipe) {
  if (recipe == "tensorwise") return absl::OkStatus();
  if (recipe == "rowwise") {
    return absl::InvalidArgumentError(
        "model.fp8_recipe = \"rowwise\" is not implemented (nanochat runs it through torchao's rowwise "
        "kernels); "
        "use \"tensorwise\", nanochat's default");
  }
  return absl::InvalidArgumentError(fmt::format(
      "model.fp8_recipe must be \"tensorwise\" (or nanochat's \"rowwise\", not implemented), got '{}'",
      recipe));
}

absl::StatusOr<std::string> choose_fp8(bool fp8, const std::string& recipe, Device device,
                                       const GPTConfig& model) {
  if (!fp8) return std::string("fp8: off (model.fp8 = false)");
  if (absl::Status valid = validate_fp8_recipe(recipe); !valid.ok()) return valid;
  if (device == Device::kCuda) {
    constexpr int kFirstFp8Capability = 89;  // Ada (8.9), Hopper (9.0), Blackwell (10.x, 12.x)
    int major = 0, minor = 0;
    std::string reason;
    if (!gpu_compute_capability(&major, &minor, &reason))
      return absl::FailedPreconditionError(fmt::format("model.fp8: no usable GPU: {}", reason));
    if (major * 10 + minor < kFirstFp8Capability) {
      return absl::FailedPreconditionError(fmt::format(
          "model.fp8 = true needs FP8 tensor cores (compute capability 8.9 or newer); this GPU is {}.{}: set "
          "model.fp8 = false",
          major, minor));
    }
  }
  return fmt::format("fp8: {} scaling, {}", recipe, Fp8Linears::of(model).summary());
}

}  // namespace nanoforge
