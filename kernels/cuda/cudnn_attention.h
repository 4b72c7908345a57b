// cuDNN's fused attention behind ops::attention_forward / attention_backward (the same contract:
// kernels/ops.h), chosen by ops::set_attention_implementation. Defined by cudnn_attention.cpp in real GPU
// builds with cuDNN, and by cudnn_attention_unavailable.cpp elsewhere (the emulator has no cuDNN), which says
// why.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

#include "kernels/attention_implementation.h"
#include "kernels/head_slice.h"
#include "kernels/tensor.h"

namespace nanoforge::cuda {

bool cudnn_attention_built(std::string* reason);
absl::Status check_cudnn_attention(const ops::AttentionCalls& calls, int64_t* workspace_bytes);

// The ops' contract; `flash_workspace` is the op's workspace, used only where cuDNN refuses a shape that
// the start-up check did not cover and the call falls back to flash (once reported on stderr).
void cudnn_attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v,
                             int64_t window, double scale, TensorView flash_workspace);
void cudnn_attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                              HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                              double scale, TensorView flash_workspace);

}  // namespace nanoforge::cuda
