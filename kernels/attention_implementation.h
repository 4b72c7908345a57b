// Which CUDA kernels ops::attention_forward / attention_backward run: our flash attention
// (kernels/cuda/flash_attention_*.cu, on every GPU build and the emulator) or cuDNN's fused attention through
// its graph API (kernels/cuda/cudnn_attention.cpp, real GPU builds with cuDNN only), a field of the ops'
// KernelSettings (kernels/kernel_settings.h) chosen from the recipe key model.attention; and whether cuDNN's
// can run a run's attention calls. The CPU backend has one attention.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge::ops {

enum class AttentionImplementation { kFlash, kCudnn };

const char* attention_implementation_name(AttentionImplementation implementation);  // "flash", "cudnn"

// Whether this build has cuDNN attention at all (NANOFORGE_HAVE_CUDNN); `reason` says why not (emulation
// build, cuDNN or its frontend not found at configure time) or, when it does, which cuDNN and frontend.
bool cudnn_attention_built(std::string* reason);

// The attention calls of a run: one per window (a window >= seq is plain causal), bf16 on the current GPU.
struct AttentionCalls {
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::vector<int64_t> windows;
  double scale = 0;
  // How many heads apart consecutive positions of q, k, v and their gradients lie: 2 kv_heads + heads when
  // they are head slices of the fused projection's output (the model's), 0 when they are dense tensors.
  int64_t row_heads = 0;
  bool deterministic = false;  // the backward as KernelSettings::deterministic asks
};

// Whether cuDNN attention can run these calls on this GPU: builds the forward and backward graphs of each
// window through the frontend's own support check (validate, heuristics, check_support, plan build), caches
// them for the run, and grows the shared CUDA scratch to the largest workspace they need, so that no step
// allocates. OK, or why not (not built, no GPU, or what cuDNN said). `workspace_bytes` gets that largest
// workspace.
absl::Status check_cudnn_attention(const AttentionCalls& calls, int64_t* workspace_bytes);

}  // namespace nanoforge::ops
