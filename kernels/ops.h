// The ops: the only compute entry points model/ and optim/ call, declared here from the op list
// (kernels/op_list.inc, which holds each op's contract). Each op takes TensorViews and runs on the device its
// tensors live on (all tensors of one call share a device and, except ids/targets, a dtype); kernels/cpu/
// implements the ops for f32 and f64, kernels/cuda/ for bf16 activations (docs/kernels.md). Ops never
// allocate: scratch space comes in as a workspace sized by attention_workspace_bytes(). All tensors are
// row-major and contiguous.
#pragma once

#include <cstdint>

#include "kernels/fp8_amax.h"
#include "kernels/head_slice.h"
#include "kernels/kernel_settings.h"
#include "kernels/tensor.h"

namespace nanoforge::ops {

// nanochat's F.rms_norm(x, (C,)) with eps=None: torch uses fp32 machine epsilon 2^-23 for fp32 math.
inline constexpr double kRmsNormEps = 1.1920928955078125e-07;

enum class Transpose : bool { kNo, kYes };
enum class Accumulate : bool { kNo, kYes };  // write the gradient, or add it to what is there

// A step's loss, summed over the rows whose target is not -1 (sum_loss).
struct LossSum {
  double sum = 0;
  int64_t count = 0;
};

// AdamW's hyperparameters for one update (adamw_update).
struct AdamWStep {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  int64_t step = 1;  // t, counted from 1, for the bias corrections
};

// Every op, as `Return name(params);`, with its contract (kernels/op_list.inc).
#define NANOFORGE_OP(name, Return, params, args) Return name params;
#include "kernels/op_list.inc"

// Not ops (nothing runs on a device, nothing is recorded):
// The workspace attention_forward and attention_backward need on `device`, in bytes (q's dtype, shapes as
// in op_list.inc); each backend sizes its own.
int64_t attention_workspace_bytes(Device device, DType dtype, int64_t batch, int64_t seq, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim, int64_t window);
// Whether the loss forward leaves z (true: the CPU) or the raw logits x (false: the GPU) in its logits.
bool softcap_leaves_capped_logits(Device device);

}  // namespace nanoforge::ops
