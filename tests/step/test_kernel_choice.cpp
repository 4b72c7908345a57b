// The kernel choice (step/kernel_choice.h): what auto, flash and cudnn resolve to in this build (with cuDNN
// attention built or not, each branch asserting its own outcome; the emulation build that CI runs has no
// cuDNN, so auto must fall back to flash there and say why); what auto, cublaslt and fused resolve to for the
// MLP GEMM (auto by the compute capability: the emulator of an sm_90 picks cuBLASLt, that of an sm_121 ours;
// the CPU ignores the key); and the same rule predicted for a GPU that is not here.
#include <gtest/gtest.h>

#include <string>

#include "kernels/attention_implementation.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/mlp_gemm.h"
#include "step/kernel_choice.h"

namespace nanoforge {
namespace {

void expect_error(const absl::Status& status, const std::string& fragment) {
  EXPECT_FALSE(status.ok()) << "expected an error mentioning " << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

GPTConfig small_model() {
  return GPTConfig::from_depth(2, 512, 128);
}

TEST(AttentionChoice, FlashAndTheCpuNeedNoCudnn) {
  const absl::StatusOr<ChosenAttention> flash =
      choose_attention("flash", Device::kCuda, small_model(), 2, false);
  ASSERT_TRUE(flash.ok()) << flash.status();
  EXPECT_EQ(flash->line, "attention: flash (model.attention=flash)");
  EXPECT_EQ(flash->implementation, ops::AttentionImplementation::kFlash);

  const absl::StatusOr<ChosenAttention> cpu = choose_attention("auto", Device::kCpu, small_model(), 2, false);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->line, "attention: CPU reference (model.attention=auto applies to GPU runs)");
  expect_error(choose_attention("cudnn", Device::kCpu, small_model(), 2, false).status(),
               "model.attention=cudnn runs on the GPU");
}

// Without cuDNN attention in the build (the emulation build, a CPU-only build), auto is flash and says why;
// with it, auto is whatever the support check on this GPU allows (flash where no GPU is usable), and its
// line names the choice.
TEST(AttentionChoice, AutoPicksCudnnOnlyWhereItIsBuiltAndSupported) {
  const absl::StatusOr<ChosenAttention> chosen =
      choose_attention("auto", Device::kCuda, small_model(), 2, false);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  std::string why;
  if (!ops::cudnn_attention_built(&why)) {
    EXPECT_EQ(chosen->line, "attention: flash (model.attention=auto; no cuDNN: " + why + ")");
    EXPECT_EQ(chosen->implementation, ops::AttentionImplementation::kFlash);
    // `why` says what is missing: cuDNN attention, or the whole CUDA backend in a CPU-only build.
    expect_error(choose_attention("cudnn", Device::kCuda, small_model(), 2, false).status(),
                 "model.attention=cudnn: " + why);
    return;
  }
  const bool chose_cudnn = chosen->implementation == ops::AttentionImplementation::kCudnn;
  EXPECT_EQ(chosen->line.rfind(chose_cudnn ? "attention: cudnn (" : "attention: flash (", 0), 0u)
      << chosen->line;
}

TEST(MlpGemmChoice, ExplicitSettingsAndTheCpu) {
  const GPTConfig model = GPTConfig::from_depth(2, 512, 128);
  const absl::StatusOr<ChosenMlpGemm> fused = choose_mlp_gemm("fused", Device::kCuda, model);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(fused->gemm, ops::MlpGemm::kFused);
  EXPECT_EQ(fused->line, "mlp gemm: fused, ReLU² in our GEMM's epilogue (model.mlp_gemm=fused)");
  const absl::StatusOr<ChosenMlpGemm> cublaslt = choose_mlp_gemm("cublaslt", Device::kCuda, model);
  ASSERT_TRUE(cublaslt.ok());
  EXPECT_EQ(cublaslt->gemm, ops::MlpGemm::kCublasLt);
  const absl::StatusOr<ChosenMlpGemm> cpu = choose_mlp_gemm("fused", Device::kCpu, model);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->gemm, ops::MlpGemm::kCublasLt);
  EXPECT_NE(cpu->line.find("CPU reference"), std::string::npos) << cpu->line;
}

TEST(MlpGemmChoice, FusedRefusesWidthsItCannotLoad) {
  GPTConfig model = GPTConfig::from_depth(2, 512, 128);
  model.n_embd = 132;
  model.n_head = 1;
  const absl::StatusOr<ChosenMlpGemm> fused = choose_mlp_gemm("fused", Device::kCuda, model);
  EXPECT_FALSE(fused.ok());
  EXPECT_NE(fused.status().message().find("model.mlp_gemm=fused needs a model width that is a multiple of 8"),
            std::string::npos)
      << fused.status();
}

// Ours on the GB10 class (12.x), cuBLASLt on Hopper (9.0), Ampere (8.x) and the B200 class (10.x).
TEST(MlpGemmChoice, TheAutomaticRuleTakesOursOnlyOnComputeCapability12) {
  EXPECT_EQ(ops::automatic_mlp_gemm(12), ops::MlpGemm::kFused);
  for (int major : {8, 9, 10})
    EXPECT_EQ(ops::automatic_mlp_gemm(major), ops::MlpGemm::kCublasLt) << major;
}

TEST(MlpGemmChoice, AutoFollowsTheComputeCapability) {
  int major = 0, minor = 0;
  std::string reason;
  if (!cuda::device_compute_capability(&major, &minor, &reason)) GTEST_SKIP() << "no usable GPU: " << reason;
  const absl::StatusOr<ChosenMlpGemm> chosen =
      choose_mlp_gemm("auto", Device::kCuda, GPTConfig::from_depth(2, 512, 128));
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->gemm, major == 12 ? ops::MlpGemm::kFused : ops::MlpGemm::kCublasLt) << chosen->line;
  EXPECT_NE(chosen->line.find("compute capability " + std::to_string(major) + "." + std::to_string(minor)),
            std::string::npos)
      << chosen->line;
}

// bench step --model-only: auto is the trainer's rule for the predicted GPU (cuDNN from sm_90 on, the MLP
// GEMM by compute capability); explicit settings are taken as they are.
TEST(PredictedKernelSettings, AutoFollowsTheComputeCapabilityAndExplicitSettingsInsist) {
  const GPTConfig model = GPTConfig::from_depth(2, 512, 128);
  const ops::KernelSettings h100 = predicted_kernel_settings("auto", "auto", model, 9);
  EXPECT_EQ(h100.attention, ops::AttentionImplementation::kCudnn);
  EXPECT_EQ(h100.mlp_gemm, ops::MlpGemm::kCublasLt);
  const ops::KernelSettings gb10 = predicted_kernel_settings("auto", "auto", model, 12);
  EXPECT_EQ(gb10.attention, ops::AttentionImplementation::kCudnn);
  EXPECT_EQ(gb10.mlp_gemm, ops::MlpGemm::kFused);
  const ops::KernelSettings ampere = predicted_kernel_settings("auto", "fused", model, 8);
  EXPECT_EQ(ampere.attention, ops::AttentionImplementation::kFlash);
  EXPECT_EQ(ampere.mlp_gemm, ops::MlpGemm::kFused);
  const ops::KernelSettings flash = predicted_kernel_settings("flash", "cublaslt", model, 12);
  EXPECT_EQ(flash.attention, ops::AttentionImplementation::kFlash);
  EXPECT_EQ(flash.mlp_gemm, ops::MlpGemm::kCublasLt);
  EXPECT_FALSE(flash.fp8);
  EXPECT_FALSE(flash.deterministic);
}

}  // namespace
}  // namespace nanoforge
