// The attention implementations' names (kernels/attention_implementation.h) and the cuDNN queries, which
// reach kernels/cuda/cudnn_attention.* when the CUDA backend is built.
#include "kernels/attention_implementation.h"

#ifdef NANOFORGE_HAVE_CUDA
#include "kernels/cuda/cudnn_attention.h"
#endif

namespace nanoforge::ops {
const char* attention_implementation_name(AttentionImplementation implementation) {
  return implementation == AttentionImplementation::kCudnn ? "cudnn" : "flash";
}

bool cudnn_attention_built(std::string* reason) {
#ifdef NANOFORGE_HAVE_CUDA
  return cuda::cudnn_attention_built(reason);
#else
  if (reason != nullptr) *reason = "this nanoforge was built without the CUDA backend";
  return false;
#endif
}

absl::Status check_cudnn_attention(const AttentionCalls& calls, int64_t* workspace_bytes) {
#ifdef NANOFORGE_HAVE_CUDA
  return cuda::check_cudnn_attention(calls, workspace_bytes);
#else
  (void)calls;
  (void)workspace_bytes;
  return absl::FailedPreconditionError("this nanoforge was built without the CUDA backend");
#endif
}

}  // namespace nanoforge::ops
