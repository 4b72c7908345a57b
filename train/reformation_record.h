// A round that `nanoforge launch` re-formed (dist/launch_env.h's note: after a failure, or to take in a
// machine that came back), as rank 0 records it once the checkpoint is loaded: one metrics.jsonl record at
// the step resumed from and one console line (docs/launch.md). `nanoforge report` and the end-of-run summary
// read the record back; what the failure cost is in it: the time to the resume and the steps trained again.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <string>

#include "dist/launch_env.h"
#include "train/checkpoint/resume.h"
#include "train/metrics_log.h"

namespace nanoforge {

struct ReformationRecord {
  std::string console_line;  // with its newline
  MetricRecord record;       // "step", "event": "reformation", "cause", ...
};

// The record of `reformation` resumed at `resumed_step` on `world_size` ranks, `now_unix_ms` after the epoch;
// `redone`: the steps after the checkpoint that the resume dropped from metrics.jsonl.
ReformationRecord reformation_record(const LaunchReformation& reformation, int64_t resumed_step,
                                     int64_t world_size, const DroppedSteps& redone, int64_t now_unix_ms);

// Prints the console line and writes the record, now.
absl::Status record_reformation(const LaunchReformation& reformation, int64_t resumed_step,
                                int64_t world_size, const DroppedSteps& redone, MetricsLog& metrics);

}  // namespace nanoforge
