// nanochat's training horizon and its batch / learning-rate / weight-decay scaling (base_train.py §3.1 of the
// spec): tokens from the param:data ratio, the total batch from a power law against a depth-12 reference,
// the batch LR scale sqrt(B / 2^19), the weight decay scaled by batch and horizon, and the iteration count.
#pragma once

#include <cstdint>

#include "model/gpt_config.h"

namespace nanoforge {

struct HorizonOptions {
  double target_param_data_ratio = 12;  // --target-param-data-ratio
  int64_t total_batch_size = -1;        // tokens per step; -1: nanochat's power law
  int64_t num_iterations = -1;          // > 0 overrides the horizon
  double target_flops = -1;             // > 0: horizon from a FLOPs budget
  double base_weight_decay = 0.28;      // --weight-decay
  int64_t aspect_ratio = 64;            // to build the depth-12 reference the same way
  int64_t head_dim = 128;
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

TrainingHorizon training_horizon(const GPTConfig& config, const HorizonOptions& options);

}  // namespace nanoforge
