// cuDNN's fused attention behind ops::attention_forward / attention_backward (the same contract:
// kernels/op_list.inc), chosen by ops::set_attention_implementation. Defined by cudnn_attention.cpp in real
// GPU builds with cuDNN, and by cudnn_attention_unavailable.cpp elsewhere (the emulator has no cuDNN), which
// says why.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

#include "kernels/attention_implementation.h"
#include "kernels/ops.h"

namespace nanoforge::cuda {

bool cudnn_attention_built(std::string* reason);
absl::Status check_cudnn_attention(const ops::AttentionCalls& calls, int64_t* workspace_bytes);

// The attention ops' contract, declared from kernels/op_list.inc (NANOFORGE_CUDA_VARIANT); the workspace is
// the flash kernels', used only where cuDNN refuses a shape that the start-up check did not cover and the
// call falls back to flash (once reported on stderr).
#define NANOFORGE_OP(name, Return, params, args)
#define NANOFORGE_CUDA_VARIANT(name, Return, params, args) Return name params;
#include "kernels/op_list.inc"

}  // namespace nanoforge::cuda
