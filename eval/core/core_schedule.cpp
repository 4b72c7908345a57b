// CoreSchedule::validate and read_bundle.
#include "eval/core/core_schedule.h"

#include <fmt/format.h>

#include "eval/core/core_eval.h"
#include "support/status.h"

namespace nanoforge {

absl::Status CoreSchedule::validate() const {
  if (every == 0 || every < -1)
    return absl::InvalidArgumentError("train.core_every must be > 0 or -1 (never)");
  if (max_per_task == 0 || max_per_task < -1) {
    return absl::InvalidArgumentError("train.core_max_per_task must be > 0 or -1 (all)");
  }
  return absl::OkStatus();
}

absl::StatusOr<CoreBundle> CoreSchedule::read_bundle() const {
  absl::StatusOr<CoreBundle> read = CoreBundle::read(bundle);
  if (!read.ok()) {
    return absl::Status(read.status().code(),
                        fmt::format("train.core_bundle: {}", std::string(read.status().message())));
  }
  NANOFORGE_RETURN_IF_ERROR(check_core_max_per_task(*read, max_per_task, "train.core_max_per_task"));
  return read;
}

}  // namespace nanoforge
