// The kernel choices of kernel_choice.h: each setting resolved against the build, the GPU and the model,
// composed into one KernelSettings with the lines that say what runs.
#include "step/kernel_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/device.h"
#include "model/fp8_linears.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// Every attention call a training step makes: one shape, one window per layer, scale 1/sqrt(head dim) as
// GPT::attention_scale.
ops::AttentionCalls run_attention_calls(const GPTConfig& model, int64_t batch, bool deterministic) {
  ops::AttentionCalls calls;
  calls.deterministic = deterministic;
  calls.batch = batch;
  calls.seq = model.sequence_len;
  calls.heads = model.n_head;
  calls.kv_heads = model.n_kv_head;
  calls.head_dim = model.head_dim();
  calls.scale = 1.0 / std::sqrt(static_cast<double>(model.head_dim()));
  calls.row_heads = 2 * model.n_kv_head + model.n_head;  // q, k, v are slices of GPT's vkq
  for (int64_t layer = 0; layer < model.n_layer; ++layer)
    calls.windows.push_back(model.window(layer));
  return calls;
}

std::string mib(int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// The fused GEMM's 16-byte loads need K = n_embd and M = 4 n_embd to be multiples of 8.
bool fused_gemm_fits(const GPTConfig& model) {
  return model.n_embd % 8 == 0;
}

}  // namespace

absl::Status validate_attention_setting(const std::string& setting, const std::string& train_device) {
  if (std::find(std::begin(kAttentionSettings), std::end(kAttentionSettings), setting) ==
      std::end(kAttentionSettings)) {
    return absl::InvalidArgumentError(
        fmt::format("model.attention must be auto, cudnn or flash, got '{}'", setting));
  }
  if (setting != "cudnn") return absl::OkStatus();
  if (train_device == "cpu") {
    return absl::InvalidArgumentError(
        "model.attention=cudnn runs on the GPU, but train.device=cpu: use model.attention=auto (or flash) "
        "on the CPU");
  }
  std::string why;
  if (!ops::cudnn_attention_built(&why)) {
    return absl::InvalidArgumentError(
        fmt::format("model.attention=cudnn: {}; use model.attention=auto or flash", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<ChosenAttention> choose_attention(const std::string& setting, Device device,
                                                 const GPTConfig& model, int64_t batch, bool deterministic) {
  using ops::AttentionImplementation;
  if (device == Device::kCpu) {
    if (setting == "cudnn") {
      return absl::InvalidArgumentError(
          "model.attention=cudnn runs on the GPU, but this run is on the CPU: use model.attention=auto");
    }
    return ChosenAttention{
        AttentionImplementation::kFlash,
        fmt::format("attention: CPU reference (model.attention={} applies to GPU runs)", setting)};
  }
  if (setting == "flash")
    return ChosenAttention{AttentionImplementation::kFlash, "attention: flash (model.attention=flash)"};
  std::string built;
  const bool has_cudnn = ops::cudnn_attention_built(&built);
  int64_t workspace = 0;
  const absl::Status supported =
      has_cudnn ? ops::check_cudnn_attention(run_attention_calls(model, batch, deterministic), &workspace)
                : absl::FailedPreconditionError(built);
  if (!supported.ok()) {
    if (setting == "cudnn") {
      return absl::FailedPreconditionError(fmt::format(
          "model.attention=cudnn: {}; use model.attention=auto or flash", std::string(supported.message())));
    }
    return ChosenAttention{AttentionImplementation::kFlash,
                           fmt::format("attention: flash (model.attention=auto; no cuDNN: {})",
                                       std::string(supported.message()))};
  }
  return ChosenAttention{
      AttentionImplementation::kCudnn,
      fmt::format("attention: cudnn (model.attention={}; {}; workspace {} from the shared scratch)", setting,
                  built, mib(workspace))};
}

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

absl::StatusOr<ChosenKernels> choose_kernels(const KernelRequest& request, Device device,
                                             const GPTConfig& model) {
  NANOFORGE_ASSIGN_OR_RETURN(
      const ChosenAttention attention,
      choose_attention(request.attention, device, model, request.batch, request.deterministic));
  NANOFORGE_ASSIGN_OR_RETURN(const ChosenMlpGemm mlp_gemm, choose_mlp_gemm(request.mlp_gemm, device, model));
  NANOFORGE_ASSIGN_OR_RETURN(const std::string fp8,
                             choose_fp8(request.fp8, request.fp8_recipe, device, model));
  ChosenKernels chosen;
  chosen.settings = {attention.implementation, mlp_gemm.gemm, request.deterministic, request.fp8};
  // On the CPU the GPU's attention and GEMM names mean nothing, and the backend is deterministic.
  if (device == Device::kCpu) {
    chosen.lines = fmt::format("kernels: the CPU backend's ({}; {}), fp8 {}\n{}\n", attention.line,
                               mlp_gemm.line, request.fp8 ? "on" : "off", fp8);
  } else {
    chosen.lines = fmt::format("kernels: {} ({}; {})\n{}\n", chosen.settings.describe(), attention.line,
                               mlp_gemm.line, fp8);
  }
  return chosen;
}

ops::KernelSettings predicted_kernel_settings(const std::string& attention, const std::string& mlp_gemm,
                                              const GPTConfig& model, int compute_capability_major) {
  ops::KernelSettings settings;
  settings.mlp_gemm = mlp_gemm == "fused"      ? ops::MlpGemm::kFused
                      : mlp_gemm == "cublaslt" ? ops::MlpGemm::kCublasLt
                                               : automatic_mlp_gemm_for(model, compute_capability_major);
  constexpr int kFirstCudnnAttentionMajor = 9;  // Hopper: cuDNN 9's fused attention on every GPU of the table
  const bool cudnn =
      attention == "cudnn" || (attention == "auto" && compute_capability_major >= kFirstCudnnAttentionMajor);
  settings.attention = cudnn ? ops::AttentionImplementation::kCudnn : ops::AttentionImplementation::kFlash;
  return settings;
}

}  // namespace nanoforge
