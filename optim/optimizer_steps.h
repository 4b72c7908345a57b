// nanochat's MuonAdamW, one update at a time: AdamW for the embeddings, the head and the scalars
// (elementwise, so it applies to any piece of a parameter), Muon for every matrix in the blocks. Muon per
// matrix: Nesterov momentum, MuonEq row equilibration, Polar Express orthogonalisation (5 iterations with
// nanochat's coefficients), Muon+ renormalisation to sqrt(min(m, n)), NorMuon variance reduction, then the
// update with cautious weight decay. Everything goes through kernels/ops.h, so it runs where the model runs.
// The optimizer that applies them — to the pieces each rank owns — is optim/data_parallel_optimizer.h.
#pragma once

#include <cstdint>

#include "kernels/device_buffer.h"
#include "optim/param_groups.h"
#include "optim/schedules.h"

namespace nanoforge {

// Polar Express coefficients (a, b, c) per iteration: num_iters 5, safety 2e-2, cushion 2 (nanochat).
inline constexpr double kPolarExpressCoefficients[5][3] = {
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323}};

// `step` counts optimizer steps from 1 (AdamW's bias correction); lr is the scheduled rate of the group.
void adamw_step(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                const ParamGroup& group, double lr, int64_t step);

// Scratch for muon_step: room for the largest matrix (twice) and the largest Gram matrix (twice). The update
// is orthogonalised in it: in bf16 on the GPU, as nanochat does there (its Polar Express casts to bf16), in
// the arena's dtype on the CPU.
struct MuonScratch {
  TensorView matrix_a, matrix_b, gram_a, gram_b;  // 1-D
};
// The dtype Muon orthogonalises in for parameters of `param_dtype` on `device`.
DType muon_scratch_dtype(Device device, DType param_dtype);
// Takes the scratch for matrices of up to `max_matrix_elements` whose smaller side is at most `max_side`, in
// muon_scratch_dtype(arena's device and dtype).
MuonScratch take_muon_scratch(ArenaAllocator& arena, int64_t max_matrix_elements, int64_t max_side);
// The scratch any matrix of `groups` fits in (their Muon groups).
MuonScratch take_muon_scratch_for(ArenaAllocator& arena, const std::vector<ParamGroup>& groups);

// momentum (rows, cols) and second_moment ((rows, 1) or (1, cols)) are the matrix's state, in the dtype of
// param and grad; grad is read only.
void muon_step(TensorView param, TensorView grad, TensorView momentum, TensorView second_moment,
               const ParamGroup& group, const ScheduleValues& schedule, double lr,
               const MuonScratch& scratch);

}  // namespace nanoforge
