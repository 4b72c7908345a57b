// nanochat's per-iteration schedules (base_train.py): the learning-rate multiplier (linear warmup, constant,
// linear warmdown to a final fraction), Muon's momentum (warmup 0.85 -> 0.97 over 400 steps, down to 0.90 in
// the warmdown) and Muon's weight decay (cosine from the scaled value down to 0). `iteration` counts from 0.
#pragma once

#include <cstdint>

namespace nanoforge {

// The shape of the learning-rate schedule: base_train's flags with its defaults (the [train] keys of a
// recipe).
struct ScheduleShape {
  int64_t warmup_steps = 40;     // --warmup-steps
  double warmdown_ratio = 0.65;  // --warmdown-ratio: the last round(0.65 * N) steps decay
  double final_lr_frac = 0.05;   // --final-lr-frac
};

// A run's schedule: the shape over its horizon.
struct ScheduleConfig : ScheduleShape {
  int64_t num_iterations = 0;
  double muon_weight_decay = 0;  // the horizon-scaled weight decay (wd_scaled)
};

// The values every group's rate and Muon's momentum and decay take at one iteration.
struct ScheduleValues {
  double lr_multiplier = 1;
  double muon_momentum = 0.95;
  double muon_weight_decay = 0;
};

// round(warmdown_ratio * num_iterations) with Python's half-to-even rounding.
int64_t warmdown_iterations(const ScheduleConfig& config);
double lr_multiplier(const ScheduleConfig& config, int64_t iteration);
double muon_momentum(const ScheduleConfig& config, int64_t iteration);
double muon_weight_decay(const ScheduleConfig& config, int64_t iteration);
ScheduleValues schedule_at(const ScheduleConfig& config, int64_t iteration);

}  // namespace nanoforge
