// choose_attention_workspace (attention_workspace_choice.h).
#include "kernels/cuda/attention_workspace_choice.h"

#include <fmt/format.h>

namespace nanoforge::cuda {

int64_t attention_workspace_budget_bytes(int64_t free_device_bytes) {
  return free_device_bytes / 4;
}

AttentionWorkspaceChoice choose_attention_workspace(int64_t requested_bytes, int64_t budget_bytes,
                                                    bool deterministic_backward) {
  if (requested_bytes <= budget_bytes) return {};
  const double requested_gb = static_cast<double>(requested_bytes) / 1e9;
  const double budget_gb = static_cast<double>(budget_bytes) / 1e9;
  if (deterministic_backward) {
    return {AttentionWorkspaceDecision::kRefuse,
            fmt::format("its deterministic backward asks for {:.2f} GB of workspace, more than the {:.2f} GB "
                        "this GPU can spare: set model.attention = \"flash\" (the hand-written attention, "
                        "deterministic too), or train.deterministic = false to let cuDNN use its "
                        "non-deterministic backward",
                        requested_gb, budget_gb)};
  }
  return {AttentionWorkspaceDecision::kFallBackToFlash,
          fmt::format("it asks for {:.2f} GB of workspace, more than the {:.2f} GB this GPU can spare",
                      requested_gb, budget_gb)};
}

}  // namespace nanoforge::cuda
