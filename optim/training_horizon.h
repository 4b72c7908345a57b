// nanochat's training horizon and its batch / learning-rate / weight-decay scaling (its base_train.py):
// tokens from the param:data ratio, the total batch from a power law against a depth-12 reference, the
// batch LR scale sqrt(B / 2^19), the weight decay scaled by batch and horizon, and the iteration count.
#pragma once

#include <cstdint>

#include "model/gpt_config.h"

namespace nanoforge {

// What sets the horizon: base_train's flags with its defaults (the [train] keys of a recipe).
struct HorizonOptions {
  double target_param_data_ratio = 12;  // --target-param-data-ratio
  int64_t total_batch_size = -1;        // tokens per step; -1: nanochat's power law
  int64_t num_iterations = -1;          // > 0 overrides the horizon
  double target_flops = -1;             // > 0: horizon from a FLOPs budget
};

struct TrainingHorizon {
  int64_t scaling_params = 0;    // transformer matrices + lm_head
  int64_t target_tokens = 0;     // int(ratio * scaling_params)
  int64_t reference_tokens = 0;  // D_REF: ratio * scaling params of depth 12
  int64_t total_batch_size = 0;  // tokens per optimizer step (B)
  int64_t num_iterations = 0;
  double batch_lr_scale = 1;  // sqrt(B / 2^19), exactly 1 at B = 2^19
  double weight_decay = 0;    // base * sqrt(B / 2^19) * D_REF / target_tokens
};

inline constexpr int64_t kReferenceBatchTokens = 1 << 19;  // nanochat's B_REF

// The horizon of the model `sizing` builds with `vocab_size` tokens (the depth-12 reference is sized the same
// way); `base_weight_decay` is the optimizer's weight_decay before scaling.
TrainingHorizon training_horizon(const ModelSizing& sizing, int64_t vocab_size, const HorizonOptions& options,
                                 double base_weight_decay);

}  // namespace nanoforge
