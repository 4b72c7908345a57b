// TrainingStep::run: zero the gradients and the step's scalars, then for each micro-batch a forward (its mean
// loss added to the scalars on the device, no read-back) and a backward, the last of which hands each
// finished gradient range to the optimizer's reduction; then the votes, the update with the scalars'
// all-reduce, and the step's one read-back.
#include "step/training_step.h"

#include <cmath>
#include <vector>

#include "kernels/host_transfer.h"
#include "kernels/ops.h"
#include "support/status.h"

namespace nanoforge {

TrainingStep::TrainingStep(GPT& model, DataParallelOptimizer& optimizer, int world_size)
    : model_(model),
      optimizer_(optimizer),
      world_size_(world_size),
      sums_buffer_(model.device(), kStepSums * static_cast<int64_t>(sizeof(double))) {
  model_.set_weights_needed_callback([this](int64_t from) { optimizer_.weights_needed(from); });
}

absl::StatusOr<StepResult> TrainingStep::run(const StepRequest& request) {
  const auto stage = [&](StepStage next) {
    if (request.on_stage) request.on_stage(next);
  };
  const TensorView sums(sums_buffer_.data(), {kStepSums}, DType::kF64, model_.device());
  stage(StepStage::kForward);
  model_.zero_grad();
  ops::fill(sums, 0.0);
  const double loss_scale = 1.0 / static_cast<double>(request.grad_accum_steps);
  for (int64_t micro = 0; micro < request.grad_accum_steps; ++micro) {
    stage(StepStage::kForward);
    NANOFORGE_ASSIGN_OR_RETURN(const MicroBatch batch, request.next_micro_batch(micro));
    model_.forward_for_backward_without_readback(batch.ids, batch.targets, loss_scale);
    ops::add_mean_loss(sums.rows(kLossSum, 1), model_.token_losses(), batch.targets);
    stage(StepStage::kBackward);
    // Only the last micro-batch's backward starts the reductions: the gradients are summed locally before.
    const bool last = micro + 1 == request.grad_accum_steps;
    if (last)
      model_.set_gradient_ready_callback([this](int64_t ready) { optimizer_.gradients_ready(ready); });
    model_.backward();
    if (last) model_.set_gradient_ready_callback({});
  }
  // The update, then the scalars' all-reduce, then the weight gathers, which the next forward waits for.
  stage(StepStage::kOptimizer);
  ops::fill(sums.rows(kRanksSignalled, 1), request.signalled ? 1.0 : 0.0);
  ops::fill(sums.rows(kRanksFailedSave, 1), request.failed_save ? 1.0 : 0.0);
  NANOFORGE_ASSIGN_OR_RETURN(const CommWork summed, optimizer_.start_step(request.schedule, sums));
  stage(StepStage::kStepEnd);
  NANOFORGE_RETURN_IF_ERROR(summed.wait());
  const std::vector<double> totals = download<double>(sums);  // the step's one read-back
  StepResult result;
  result.loss =
      totals[kLossSum] / static_cast<double>(request.grad_accum_steps) / static_cast<double>(world_size_);
  result.grad_norm = std::sqrt(totals[kGradSquares]);
  result.ranks_signalled = totals[kRanksSignalled];
  result.ranks_failed_save = totals[kRanksFailedSave];
  return result;
}

}  // namespace nanoforge
