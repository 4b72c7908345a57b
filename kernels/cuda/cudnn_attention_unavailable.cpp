// cuDNN attention in a build without it (emulation builds: the emulator has no cuDNN; or cuDNN or its
// frontend was not found at configure time): says why, so `model.attention=auto` picks flash and an explicit
// `cudnn` is refused before the run starts. The ops never reach the two passes here (nothing sets cuDNN).
#include <fmt/format.h>

#include "kernels/cuda/cudnn_attention.h"
#include "support/check.h"

namespace nanoforge::cuda {
namespace {
constexpr const char* kNotBuilt =
    "this nanoforge was built without cuDNN attention (" NANOFORGE_CUDNN_WHY ")";
}

bool cudnn_attention_built(std::string* reason) {
  if (reason != nullptr) *reason = kNotBuilt;
  return false;
}

absl::Status check_cudnn_attention(const ops::AttentionCalls&, int64_t*) {
  return absl::FailedPreconditionError(kNotBuilt);
}

void cudnn_attention_forward(TensorView, TensorView, HeadSlice, HeadSlice, HeadSlice, int64_t, double,
                             TensorView, const ops::KernelSettings&) {
  NANOFORGE_CHECK(false, "attention_forward: {}", kNotBuilt);
}

void cudnn_attention_backward(HeadSlice, HeadSlice, HeadSlice, TensorView, HeadSlice, HeadSlice, HeadSlice,
                              TensorView, TensorView, int64_t, double, TensorView,
                              const ops::KernelSettings&) {
  NANOFORGE_CHECK(false, "attention_backward: {}", kNotBuilt);
}

}  // namespace nanoforge::cuda
