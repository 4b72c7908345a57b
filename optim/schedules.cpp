// The schedules, term by term as base_train.py writes them.
#include "optim/schedules.h"

#include <cmath>
#include <numbers>

namespace nanoforge {

int64_t warmdown_iterations(const ScheduleConfig& config) {
  return static_cast<int64_t>(
      std::nearbyint(config.warmdown_ratio * static_cast<double>(config.num_iterations)));
}

double lr_multiplier(const ScheduleConfig& config, int64_t iteration) {
  const int64_t warmdown = warmdown_iterations(config);
  if (iteration < config.warmup_steps) {
    return static_cast<double>(iteration + 1) / static_cast<double>(config.warmup_steps);
  }
  if (iteration <= config.num_iterations - warmdown) return 1.0;
  const double progress =
      static_cast<double>(config.num_iterations - iteration) / static_cast<double>(warmdown);
  return progress + (1.0 - progress) * config.final_lr_frac;
}

double muon_momentum(const ScheduleConfig& config, int64_t iteration) {
  constexpr int64_t kWarmupSteps = 400;  // nanochat: momentum 0.85 -> 0.97 over the first 400 steps
  const int64_t warmdown = warmdown_iterations(config);
  const int64_t warmdown_start = config.num_iterations - warmdown;
  if (iteration < kWarmupSteps) {
    const double fraction = static_cast<double>(iteration) / kWarmupSteps;
    return (1.0 - fraction) * 0.85 + fraction * 0.97;
  }
  if (iteration >= warmdown_start) {
    const double progress = static_cast<double>(iteration - warmdown_start) / static_cast<double>(warmdown);
    return 0.97 * (1.0 - progress) + 0.90 * progress;
  }
  return 0.97;
}

double muon_weight_decay(const ScheduleConfig& config, int64_t iteration) {
  const double fraction = static_cast<double>(iteration) / static_cast<double>(config.num_iterations);
  return config.muon_weight_decay * 0.5 * (1.0 + std::cos(std::numbers::pi * fraction));
}

ScheduleValues schedule_at(const ScheduleConfig& config, int64_t iteration) {
  return {lr_multiplier(config, iteration), muon_momentum(config, iteration),
          muon_weight_decay(config, iteration)};
}

}  // namespace nanoforge
