// The recipe key model.mlp_gemm (auto | cublaslt | fused) turned into the MLP GEMM of a run's KernelSettings
// (kernels/mlp_gemm.h): auto asks that header's rule with this GPU's compute capability (our fused GEMM on a
// GB10, cuBLASLt with the ReLU² pass elsewhere: the performance model's prediction, docs/kernels.md "The MLP
// GEMM"); cublaslt and fused insist. The trainer prints the line.
#pragma once

#include <absl/status/statusor.h>

#include <string>

#include "kernels/mlp_gemm.h"
#include "kernels/tensor.h"
#include "model/gpt_config.h"

namespace nanoforge {

inline constexpr const char* kMlpGemmSettings[] = {"auto", "cublaslt", "fused"};

// What auto picks for `model` on a GPU of this compute capability major version: kernels/mlp_gemm.h's rule
// where the fused GEMM can load the model's rows (a width that is a multiple of 8), else cuBLASLt.
ops::MlpGemm automatic_mlp_gemm_for(const GPTConfig& model, int compute_capability_major);

// Recipe validation: a known value (the key names itself in the error).
absl::Status validate_mlp_gemm_setting(const std::string& setting);

struct ChosenMlpGemm {
  ops::MlpGemm gemm = ops::MlpGemm::kCublasLt;
  std::string line;  // what was chosen and why: "mlp gemm: fused, ReLU² in our GEMM's epilogue (...)"
};

// Resolves `setting` for a run of `model` on `device`. fused needs the model's width and MLP width to be
// multiples of 8 (the kernel's 16-byte loads); auto then keeps cuBLASLt.
absl::StatusOr<ChosenMlpGemm> choose_mlp_gemm(const std::string& setting, Device device,
                                              const GPTConfig& model);

}  // namespace nanoforge
