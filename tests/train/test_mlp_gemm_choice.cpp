// model.mlp_gemm: the values the recipe accepts, the error that names the key, and what auto, cublaslt and
// fused resolve to (auto by the GPU's compute capability: the emulator of an sm_90 picks cuBLASLt, that of an
// sm_121 ours; the CPU ignores the key).
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/mlp_gemm.h"
#include "train/mlp_gemm_choice.h"
#include "train/recipe.h"

namespace nanoforge {
namespace {

class MlpGemmChoice : public testing::Test {};

TEST_F(MlpGemmChoice, TheRecipeKeyIsValidatedByName) {
  Recipe recipe;
  recipe.data = {"a", "b", "c"};
  EXPECT_EQ(recipe.model.mlp_gemm, "auto");
  EXPECT_TRUE(validate_recipe(recipe).ok());
  EXPECT_TRUE(apply_overrides(recipe, {"model.mlp_gemm=fused"}).ok());
  EXPECT_EQ(recipe.model.mlp_gemm, "fused");
  EXPECT_TRUE(validate_recipe(recipe).ok());
  recipe.model.mlp_gemm = "cutlass";
  const absl::Status status = validate_recipe(recipe);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("model.mlp_gemm must be auto, cublaslt or fused, got 'cutlass'"),
            std::string::npos)
      << status;
}

TEST_F(MlpGemmChoice, ExplicitSettingsAndTheCpu) {
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

TEST_F(MlpGemmChoice, FusedRefusesWidthsItCannotLoad) {
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
TEST_F(MlpGemmChoice, TheAutomaticRuleTakesOursOnlyOnComputeCapability12) {
  EXPECT_EQ(ops::automatic_mlp_gemm(12), ops::MlpGemm::kFused);
  for (int major : {8, 9, 10})
    EXPECT_EQ(ops::automatic_mlp_gemm(major), ops::MlpGemm::kCublasLt) << major;
}

TEST_F(MlpGemmChoice, AutoFollowsTheComputeCapability) {
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

}  // namespace
}  // namespace nanoforge
