// CoreSchedule::validate.
#include "eval/core/core_schedule.h"

namespace nanoforge {

absl::Status CoreSchedule::validate() const {
  if (every == 0 || every < -1)
    return absl::InvalidArgumentError("train.core_every must be > 0 or -1 (never)");
  if (max_per_task == 0 || max_per_task < -1) {
    return absl::InvalidArgumentError("train.core_max_per_task must be > 0 or -1 (all)");
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
