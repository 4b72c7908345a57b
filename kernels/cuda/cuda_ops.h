// The CUDA backend: the ops of kernels/op_list.inc with their contracts, in mixed precision, declared from
// the list. kernels/ops.cpp routes an op here when its tensors live on the GPU; each launcher checks its own
// dtypes (the table of dtypes on the GPU: docs/kernels.md, "CUDA backend").
// Kernels run on the current device's default stream, in order; nothing here synchronises with the host
// except sum_loss and squared_norm, which return a value (add_mean_loss and add_squared_norm are their
// device-side twins).
#pragma once

#include "kernels/ops.h"

namespace nanoforge::cuda {

// Every op of kernels/op_list.inc, one launcher each: kernels/cuda/<op family>.cu (memory_ops.cu for the
// memory ops, flash_attention_*.cu, mlp_gemm.cu for the MLP's GEMMs, muon_steps.cu for the optimizer's and
// add_squared_norm, step_sums.cu for add_mean_loss). An op left out fails the link, naming it.
#define NANOFORGE_OP(name, Return, params, args) Return name params;
#include "kernels/op_list.inc"

// Written by hand, as it is no op: the flash kernels' workspace (f32 statistics, whatever q's dtype).
int64_t attention_workspace_bytes(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads,
                                  int64_t head_dim, int64_t window);

}  // namespace nanoforge::cuda
