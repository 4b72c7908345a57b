// MuonAdamW: nanochat's optimizer on one rank — AdamW for the embeddings, the head and the scalars, Muon
// for every matrix in the blocks. Muon per matrix: Nesterov momentum, MuonEq row equilibration, Polar
// Express orthogonalisation (5 iterations with nanochat's coefficients), Muon+ renormalisation to
// sqrt(min(m, n)), NorMuon variance reduction, then the update with cautious weight decay. It works on the
// model's flat parameter and gradient buffers through kernels/ops.h, so it runs where the model runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_buffer.h"
#include "model/param_layout.h"
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

class MuonAdamW {
 public:
  // params and grads: the model's flat buffers (layout order). State starts at zero.
  MuonAdamW(std::vector<ParamGroup> groups, const ParamLayout& layout, TensorView params, TensorView grads);

  // One step: every group's lr is initial_lr * lr_multiplier; Muon takes the momentum and weight decay.
  void step(const ScheduleValues& schedule);

  const std::vector<ParamGroup>& groups() const { return groups_; }
  int64_t steps_taken() const { return steps_taken_; }
  void set_steps_taken(int64_t steps) { steps_taken_ = steps; }  // when state is restored
  int64_t state_bytes() const { return state_.bytes(); }

  // Optimizer state of one parameter, PyTorch shapes: AdamW's moments (the parameter's shape); Muon's
  // momentum (rows, cols) and second moment ((rows, 1) when rows >= cols, else (1, cols)).
  struct ParamState {
    TensorView exp_avg, exp_avg_sq;
    TensorView momentum_buffer, second_moment;
  };
  const ParamState& state(const std::string& name) const;

 private:
  void adamw_step(const ParamGroup& group, double lr);
  void muon_step(const ParamGroup& group, const ScheduleValues& schedule, double lr);
  TensorView view(TensorView flat, const ParamInfo& info) const;

  std::vector<ParamGroup> groups_;
  const ParamLayout& layout_;
  TensorView params_, grads_;
  DeviceBuffer state_;
  std::vector<ParamState> param_state_;  // by layout index
  DeviceBuffer scratch_;
  TensorView scratch_x_, scratch_y_, scratch_a_, scratch_b_;  // largest Muon shapes, resized by view
  int64_t steps_taken_ = 0;
};

}  // namespace nanoforge
