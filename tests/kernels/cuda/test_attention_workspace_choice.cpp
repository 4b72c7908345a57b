// What cuDNN attention does with a workspace larger than the GPU can spare (kernels/cuda/
// attention_workspace_choice.h), tested as the decision it is, since the emulator has no cuDNN: within the
// budget cuDNN runs; beyond it flash attention takes the shape with one line saying why, or a deterministic
// backward refuses, naming the recipe keys that change it.
#include <gtest/gtest.h>

#include "kernels/cuda/attention_workspace_choice.h"

namespace nanoforge::cuda {
namespace {

constexpr int64_t kGB = 1000 * 1000 * 1000;

TEST(CudnnAttention, WorkspaceTooLargeFallsBack) {
  const int64_t budget = attention_workspace_budget_bytes(80 * kGB);
  EXPECT_EQ(budget, 20 * kGB);
  EXPECT_EQ(choose_attention_workspace(budget, budget, false).decision,
            AttentionWorkspaceDecision::kUseCudnn);
  EXPECT_EQ(choose_attention_workspace(budget, budget, true).decision, AttentionWorkspaceDecision::kUseCudnn);

  const AttentionWorkspaceChoice fallback = choose_attention_workspace(24 * kGB, budget, false);
  EXPECT_EQ(fallback.decision, AttentionWorkspaceDecision::kFallBackToFlash);
  EXPECT_EQ(fallback.message, "it asks for 24.00 GB of workspace, more than the 20.00 GB this GPU can spare");
}

TEST(CudnnAttention, WorkspaceTooLargeForADeterministicBackwardNamesTheRecipeKeys) {
  const AttentionWorkspaceChoice refusal = choose_attention_workspace(24 * kGB, 20 * kGB, true);
  EXPECT_EQ(refusal.decision, AttentionWorkspaceDecision::kRefuse);
  EXPECT_NE(refusal.message.find("24.00 GB"), std::string::npos) << refusal.message;
  EXPECT_NE(refusal.message.find("model.attention = \"flash\""), std::string::npos) << refusal.message;
  EXPECT_NE(refusal.message.find("train.deterministic = false"), std::string::npos) << refusal.message;
}

}  // namespace
}  // namespace nanoforge::cuda
