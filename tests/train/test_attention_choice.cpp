// model.attention: the values the recipe accepts, the errors that name the key, and what auto, flash and
// cudnn resolve to in this build (with cuDNN attention built or not, each branch asserting its own outcome;
// the emulation build that CI runs has no cuDNN, so auto must fall back to flash there and say why).
#include <gtest/gtest.h>

#include <string>

#include "kernels/attention_implementation.h"
#include "train/attention_choice.h"
#include "train/recipe.h"

namespace nanoforge {
namespace {

void expect_error(const absl::Status& status, const std::string& fragment) {
  EXPECT_FALSE(status.ok()) << "expected an error mentioning " << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

GPTConfig small_model() {
  return GPTConfig::from_depth(2, 512, 128);
}

class AttentionChoice : public testing::Test {};

TEST_F(AttentionChoice, TheRecipeKeyIsValidatedByName) {
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

TEST_F(AttentionChoice, CudnnIsRefusedBeforeTheRunWhereItIsNotBuilt) {
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

TEST_F(AttentionChoice, FlashAndTheCpuNeedNoCudnn) {
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
TEST_F(AttentionChoice, AutoPicksCudnnOnlyWhereItIsBuiltAndSupported) {
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

}  // namespace
}  // namespace nanoforge
