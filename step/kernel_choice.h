// The kernels a training step runs, chosen once from the requested settings (recipe model.attention,
// model.mlp_gemm, model.fp8, train.deterministic; bench step's flags) and the device, with the lines that say
// what was chosen and why; and the same rule predicted for a GPU that is not here (bench step --model-only).
// auto takes cuDNN's fused attention where the build has it and cuDNN supports the run's calls, and
// kernels/mlp_gemm.h's GEMM for the compute capability; explicit settings insist and fail before the run
// starts. FP8 is refused, not silently dropped, where it cannot run (docs/kernels.md).
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "kernels/attention_implementation.h"
#include "kernels/kernel_settings.h"
#include "kernels/mlp_gemm.h"
#include "kernels/tensor.h"
#include "model/gpt_config.h"

namespace nanoforge {

inline constexpr const char* kAttentionSettings[] = {"auto", "cudnn", "flash"};
inline constexpr const char* kMlpGemmSettings[] = {"auto", "cublaslt", "fused"};

// The checks that need no GPU (recipe validation); the errors name the recipe key. cudnn is refused where it
// cannot run at all (a build without cuDNN attention, or train.device=cpu); fp8_recipe "rowwise" saying it
// is not implemented.
absl::Status validate_attention_setting(const std::string& setting, const std::string& train_device);
absl::Status validate_mlp_gemm_setting(const std::string& setting);
absl::Status validate_fp8_recipe(const std::string& recipe);

struct ChosenAttention {
  ops::AttentionImplementation implementation = ops::AttentionImplementation::kFlash;
  std::string line;  // what was chosen and why: "attention: flash (model.attention=flash)"
};

// Resolves `setting` for a run of `model` on `device` with micro-batches of `batch` rows (`deterministic`:
// the backward cuDNN's support is checked for).
absl::StatusOr<ChosenAttention> choose_attention(const std::string& setting, Device device,
                                                 const GPTConfig& model, int64_t batch, bool deterministic);

// What auto picks for `model` on a GPU of this compute capability major version: kernels/mlp_gemm.h's rule
// where the fused GEMM can load the model's rows (a width that is a multiple of 8), else cuBLASLt.
ops::MlpGemm automatic_mlp_gemm_for(const GPTConfig& model, int compute_capability_major);

struct ChosenMlpGemm {
  ops::MlpGemm gemm = ops::MlpGemm::kCublasLt;
  std::string line;  // what was chosen and why: "mlp gemm: fused, ReLU² in our GEMM's epilogue (...)"
};

// Resolves `setting` for a run of `model` on `device`. fused needs the model's width and MLP width to be
// multiples of 8 (the kernel's 16-byte loads); auto then keeps cuBLASLt.
absl::StatusOr<ChosenMlpGemm> choose_mlp_gemm(const std::string& setting, Device device,
                                              const GPTConfig& model);

// For a run on `device`: refuses FP8 on a GPU without FP8 tensor cores (compute capability below 8.9), and
// returns the line base_train prints ("fp8: tensorwise scaling, converted 145/158 ...").
absl::StatusOr<std::string> choose_fp8(bool fp8, const std::string& recipe, Device device,
                                       const GPTConfig& model);

// What a run asks for: the recipe's keys (model.attention, model.mlp_gemm, model.fp8, model.fp8_recipe,
// train.deterministic) and the rows of its micro-batches.
struct KernelRequest {
  std::string attention = "auto";
  std::string mlp_gemm = "auto";
  bool fp8 = false;
  std::string fp8_recipe = "tensorwise";
  bool deterministic = false;
  int64_t batch = 1;
};

struct ChosenKernels {
  ops::KernelSettings settings;
  std::string lines;  // "kernels: ..." and "fp8: ...", each ending in a newline
};

// The three choices as one KernelSettings, and the lines rank 0 prints. The CPU backend has one attention
// and one GEMM, so a CPU run's line names no GPU kernel.
absl::StatusOr<ChosenKernels> choose_kernels(const KernelRequest& request, Device device,
                                             const GPTConfig& model);

// The attention and MLP GEMM auto would pick on a GPU of `compute_capability_major` that is not here (the
// performance model's prediction): the MLP GEMM by automatic_mlp_gemm_for; cuDNN attention from sm_90 on
// (every such GPU of perf/'s table has a real build with cuDNN 9, whose support check passes nanochat's
// shapes). Explicit settings are taken as they are; fp8 and deterministic stay off.
ops::KernelSettings predicted_kernel_settings(const std::string& attention, const std::string& mlp_gemm,
                                              const GPTConfig& model, int compute_capability_major);

}  // namespace nanoforge
