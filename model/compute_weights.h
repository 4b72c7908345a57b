// The bf16 copies of the GEMM matrices that a CUDA model's matmuls read: c_v, c_k, c_q (one stacked matrix),
// attn.c_proj, mlp.c_fc and mlp.c_proj of every block, and lm_head. The fp32 master parameters stay what the
// optimizer, data parallelism and checkpoints see; these copies are refreshed from them after every change,
// one conversion per run of matrices that is contiguous in both buffers. The other parameters (embedding
// tables, gates, lambdas) are read from the master by their own ops, so they have no copy. Each matrix starts
// 256-byte aligned in the copy, c_k and c_q right after c_v; what that does to the runs: docs/model.md,
// "On the GPU".
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device_buffer.h"
#include "model/gpt_config.h"
#include "model/model_weights.h"
#include "model/param_layout.h"

namespace nanoforge {

// Whether matmul reads this parameter (and so it has a bf16 copy on the GPU).
bool is_gemm_matrix(const ParamInfo& param);

struct ComputeWeightLayout {
  struct Run {
    int64_t master_offset = 0;  // elements of the master buffer
    int64_t copy_offset = 0;    // elements of the copy
    int64_t numel = 0;
  };
  DType dtype = DType::kBF16;
  std::vector<Run> runs;             // master order
  std::vector<int64_t> copy_offset;  // per parameter, in layout order; -1 when it has no copy
  int64_t bytes = 0;                 // of the whole copy
};

ComputeWeightLayout compute_weight_layout(const ParamLayout& layout, DType dtype);

// `weights` (views of the master) with every GEMM matrix replaced by its view in `copy`.
ModelWeights with_compute_matrices(const ModelWeights& weights, const GPTConfig& config,
                                   const ParamLayout& layout, const ComputeWeightLayout& compute,
                                   const DeviceBuffer& copy);

// copy <- master, converted, run by run. master: the flat master parameters (layout order).
void refresh_compute_copy(const ComputeWeightLayout& compute, TensorView master, const DeviceBuffer& copy);

}  // namespace nanoforge
