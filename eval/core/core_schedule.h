// When a training run evaluates CORE: the recipe's train.core_every, train.core_bundle and
// train.core_max_per_task, with nanochat's base_train defaults (--core-metric-every 2000,
// --core-metric-max-per-task 500). nanochat downloads its bundle; a nanoforge run is given one, and without
// it CORE is off.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "eval/core/core_bundle.h"

namespace nanoforge {

struct CoreSchedule {
  int64_t every = 2000;        // steps between evaluations; -1: never
  std::string bundle;          // eval bundle directory; empty: no CORE during training
  int64_t max_per_task = 500;  // examples per task after nanochat's shuffle; -1: all

  // Errors name the recipe key.
  absl::Status validate() const;
  // The bundle, read and checked against max_per_task before the run starts; errors name the recipe key.
  absl::StatusOr<CoreBundle> read_bundle() const;
  bool enabled() const { return every > 0 && !bundle.empty(); }
  // base_train's rule: every `every` steps after the first, and at the last step.
  bool due(int64_t step, bool last_step) const {
    return enabled() && (last_step || (step > 0 && step % every == 0));
  }
};

}  // namespace nanoforge
