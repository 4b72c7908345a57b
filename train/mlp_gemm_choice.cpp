// model.mlp_gemm resolved against the GPU and the model (mlp_gemm_choice.h).
#include "train/mlp_gemm_choice.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/device.h"

namespace nanoforge {

namespace {

// The fused GEMM's 16-byte loads need K = n_embd and M = 4 n_embd to be multiples of 8.
bool fused_gemm_fits(const GPTConfig& model) {
  return model.n_embd % 8 == 0;
}

}  // namespace

ops::MlpGemm automatic_mlp_gemm_for(const GPTConfig& model, int compute_capability_major) {
  return fused_gemm_fits(model) ? ops::automatic_mlp_gemm(compute_capability_major) : ops::MlpGemm::kCublasLt;
}

absl::Status validate_mlp_gemm_setting(const std::string& setting) {
  if (std::find(std::begin(kMlpGemmSettings), std::end(kMlpGemmSettings), setting) ==
      std::end(kMlpGemmSettings)) {
    return absl::InvalidArgumentError(
        fmt::format("model.mlp_gemm must be auto, cublaslt or fused, got '{}'", setting));
  }
  return absl::OkStatus();
}

absl::StatusOr<ChosenMlpGemm> choose_mlp_gemm(const std::string& setting, Device device,
                                              const GPTConfig& model) {
  using ops::MlpGemm;
  if (device == Device::kCpu) {
    return ChosenMlpGemm{
        MlpGemm::kCublasLt,
        fmt::format("mlp gemm: CPU reference (model.mlp_gemm={} applies to GPU runs)", setting)};
  }
  if (setting == "cublaslt")
    return ChosenMlpGemm{MlpGemm::kCublasLt, "mlp gemm: cublaslt and a ReLU² pass (model.mlp_gemm=cublaslt)"};
  const bool fits = fused_gemm_fits(model);
  if (!fits && setting == "fused") {
    return absl::InvalidArgumentError(fmt::format(
        "model.mlp_gemm=fused needs a model width that is a multiple of 8 (the kernel loads 16-byte chunks), "
        "got n_embd {}: use model.mlp_gemm=auto or cublaslt",
        model.n_embd));
  }
  std::string why = "model.mlp_gemm=fused";
  if (setting == "auto") {
    int major = 0, minor = 0;
    std::string reason;
    if (!gpu_compute_capability(&major, &minor, &reason)) {
      return absl::FailedPreconditionError(fmt::format("model.mlp_gemm: no usable GPU: {}", reason));
    }
    const ops::MlpGemm automatic = automatic_mlp_gemm_for(model, major);
    if (automatic == MlpGemm::kCublasLt) {
      return ChosenMlpGemm{
          MlpGemm::kCublasLt,
          fmt::format("mlp gemm: cublaslt and a ReLU² pass (model.mlp_gemm=auto; compute capability {}.{}{})",
                      major, minor,
                      fits ? "" : fmt::format(", n_embd {} not a multiple of 8", model.n_embd))};
    }
    why = fmt::format("model.mlp_gemm=auto; compute capability {}.{}", major, minor);
  }
  return ChosenMlpGemm{MlpGemm::kFused,
                       fmt::format("mlp gemm: fused, ReLU² in our GEMM's epilogue ({})", why)};
}

}  // namespace nanoforge
