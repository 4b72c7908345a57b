// training_horizon: base_train.py's arithmetic, with Python's half-to-even round where it rounds.
#include "optim/training_horizon.h"

#include <cmath>

#include "model/flops.h"
#include "model/param_layout.h"

namespace nanoforge {

TrainingHorizon training_horizon(const ModelSizing& sizing, int64_t vocab_size, const HorizonOptions& options,
                                 double base_weight_decay) {
  const GPTConfig config = GPTConfig::from_sizing(sizing, vocab_size);
  ModelSizing reference_sizing = sizing;
  reference_sizing.depth = 12;
  const GPTConfig reference = GPTConfig::from_sizing(reference_sizing, vocab_size);
  TrainingHorizon horizon;
  horizon.scaling_params = ParamLayout(config).counts().scaling();
  horizon.target_tokens =
      static_cast<int64_t>(options.target_param_data_ratio * static_cast<double>(horizon.scaling_params));
  horizon.reference_tokens = static_cast<int64_t>(
      options.target_param_data_ratio * static_cast<double>(ParamLayout(reference).counts().scaling()));
  const double token_ratio =
      static_cast<double>(horizon.target_tokens) / static_cast<double>(horizon.reference_tokens);
  if (options.total_batch_size > 0) {
    horizon.total_batch_size = options.total_batch_size;
  } else {
    // nanochat's fit: the best batch grows as (tokens)^0.383, rounded to a power of two.
    const double predicted = static_cast<double>(kReferenceBatchTokens) * std::pow(token_ratio, 0.383);
    horizon.total_batch_size = int64_t{1} << static_cast<int>(std::nearbyint(std::log2(predicted)));
  }
  const double batch_ratio = static_cast<double>(horizon.total_batch_size) / kReferenceBatchTokens;
  horizon.batch_lr_scale = horizon.total_batch_size == kReferenceBatchTokens ? 1.0 : std::sqrt(batch_ratio);
  horizon.weight_decay = base_weight_decay * std::sqrt(batch_ratio) / token_ratio;
  if (options.num_iterations > 0) {
    horizon.num_iterations = options.num_iterations;
  } else if (options.target_flops > 0) {
    const double iterations =
        std::nearbyint(options.target_flops / (static_cast<double>(flops_per_token(config)) *
                                               static_cast<double>(horizon.total_batch_size)));
    // A budget beyond what an int64 counts saturates (the run's set-up refuses it by name).
    horizon.num_iterations = iterations < 0x1p62 ? static_cast<int64_t>(iterations) : int64_t{1} << 62;
  } else {
    horizon.num_iterations = horizon.target_tokens / horizon.total_batch_size;
  }
  return horizon;
}

}  // namespace nanoforge
