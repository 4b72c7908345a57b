// What cuDNN attention does when a graph asks for more workspace than the device can spare (its
// deterministic backward may ask for gigabytes): run it, hand the shape to the hand-written flash attention
// with one line saying why, or — when determinism was asked for — refuse, naming the recipe keys to change.
// A decision of its own, apart from the cuDNN code, so that it is tested where there is no cuDNN.
#pragma once

#include <cstdint>
#include <string>

namespace nanoforge::cuda {

enum class AttentionWorkspaceDecision { kUseCudnn, kFallBackToFlash, kRefuse };

struct AttentionWorkspaceChoice {
  AttentionWorkspaceDecision decision = AttentionWorkspaceDecision::kUseCudnn;
  std::string message;  // the line to print (fallback) or the error (refusal)
};

// The budget a cuDNN attention workspace may take: a quarter of the device memory free when attention is
// chosen (the rest is the model's, its optimizer's and the activations').
int64_t attention_workspace_budget_bytes(int64_t free_device_bytes);

// The messages say what was asked and what to change; the caller names the graph (shape, window, pass).
AttentionWorkspaceChoice choose_attention_workspace(int64_t requested_bytes, int64_t budget_bytes,
                                                    bool deterministic_backward);

}  // namespace nanoforge::cuda
