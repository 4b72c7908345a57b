// The recipe's kernel keys (model.attention, model.mlp_gemm): the values validate_recipe accepts, the errors
// that name the key, and cudnn refused before the run where this build has no cuDNN attention.
#include <gtest/gtest.h>

#include <string>

#include "kernels/attention_implementation.h"
#include "train/recipe.h"

namespace nanoforge {
namespace {

void expect_error(const absl::Status& status, const std::string& fragment) {
  EXPECT_FALSE(status.ok()) << "expected an error mentioning " << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(AttentionChoice, TheRecipeKeyIsValidatedByName) {
  Recipe recipe;
  recipe.data = {"a", "b", "c"};
  EXPECT_EQ(recipe.model.attention, "auto");
  EXPECT_TRUE(validate_recipe(recipe).ok());
  recipe.model.attention = "flash";
  EXPECT_TRUE(validate_recipe(recipe).ok());
  recipe.model.attention = "fast";
  expect_error(validate_recipe(recipe), "model.attention must be auto, cudnn or flash, got 'fast'");
  recipe.model.attention = "cudnn";
  recipe.train.device = "cpu";
  expect_error(validate_recipe(recipe), "model.attention=cudnn runs on the GPU, but train.device=cpu");
  EXPECT_TRUE(apply_overrides(recipe, {"model.attention=flash"}).ok());
  EXPECT_EQ(recipe.model.attention, "flash");
}

TEST(AttentionChoice, CudnnIsRefusedBeforeTheRunWhereItIsNotBuilt) {
  Recipe recipe;
  recipe.data = {"a", "b", "c"};
  recipe.model.attention = "cudnn";
  std::string why;
  if (ops::cudnn_attention_built(&why)) {
    EXPECT_TRUE(validate_recipe(recipe).ok());
    EXPECT_NE(why.find("cuDNN"), std::string::npos) << why;
  } else {
    expect_error(validate_recipe(recipe), "model.attention=cudnn: this nanoforge was built without");
  }
}

TEST(MlpGemmChoice, TheRecipeKeyIsValidatedByName) {
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

}  // namespace
}  // namespace nanoforge
