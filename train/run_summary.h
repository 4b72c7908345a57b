// The end-of-run summary, as nanochat's base_train prints one: the best validation bits per byte and its
// step, the last CORE, the steps' time, tokens, throughput and MFU, `nanoforge launch`'s re-formations and
// the time they lost, peak memory, the last checkpoint and the command that writes the report. Everything
// about the run is read from RUN/metrics.jsonl, which a resume trims to its checkpoint and then continues, so
// a resumed run's summary covers the whole run; what only a process can measure (memory, wall time) is said
// to be this process's.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tensor.h"
#include "train/metrics_log.h"

namespace nanoforge {

// What the process that ends the run knows.
struct RunEnd {
  std::string run_dir;
  int64_t last_step = 0;  // the step the run stopped after
  int64_t num_iterations = 0;
  int64_t process_start_step = 0;  // the step this process started from (> 0 after a resume)
  Device device = Device::kCpu;
  std::string device_name;
  double process_seconds = 0;  // this process's wall-clock time
  bool checkpoints = true;     // false: a benchmark's scratch run, nothing to resume or report on: one line
};

struct RunSummary {
  std::string text;     // the console lines
  MetricRecord record;  // one metrics.jsonl record: "step", "event": "summary", then the figures
};

RunSummary summarize_run(const RunEnd& end);

}  // namespace nanoforge
