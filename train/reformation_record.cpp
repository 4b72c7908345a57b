// reformation_record: a failure keeps the line the launch tests compare; a join says which machines it took
// in and that nothing was lost (its steps_redone is 0: the ranks stopped at a checkpoint).
#include "train/reformation_record.h"

#include <fmt/format.h>

#include <chrono>

namespace nanoforge {
namespace {

std::string or_none(const std::string& nodes) {
  return nodes.empty() ? std::string("none") : nodes;
}

}  // namespace

ReformationRecord reformation_record(const LaunchReformation& reformation, int64_t resumed_step,
                                     int64_t world_size, const DroppedSteps& redone, int64_t now_unix_ms) {
  const double seconds = 1e-3 * static_cast<double>(now_unix_ms - reformation.failure_unix_ms);
  ReformationRecord result;
  if (reformation.cause == "join") {
    const bool several = reformation.joined.find(' ') != std::string::npos;
    const std::string left =
        reformation.left.empty() ? std::string() : fmt::format(", nodes left: {}", reformation.left);
    result.console_line = fmt::format(
        "re-formed by nanoforge launch to take in node{} {}: world size {} -> {}{}, stayed: {}; resumed from "
        "step {}, {:.1f} s after the stop\n",
        several ? "s" : "", or_none(reformation.joined), reformation.previous_world_size, world_size, left,
        or_none(reformation.stayed), resumed_step, seconds);
  } else {
    result.console_line = fmt::format(
        "re-formed by nanoforge launch (restart {}): world size {} -> {}, nodes left: {}, stayed: {}, "
        "joined: "
        "{}; resumed from step {}, {:.1f} s after the failure\n",
        reformation.restart, reformation.previous_world_size, world_size, or_none(reformation.left),
        or_none(reformation.stayed), or_none(reformation.joined), resumed_step, seconds);
  }
  result.record = {{"step", resumed_step},
                   {"event", std::string("reformation")},
                   {"cause", reformation.cause},
                   {"restart", int64_t{reformation.restart}},
                   {"previous_world_size", int64_t{reformation.previous_world_size}},
                   {"world_size", world_size},
                   {"nodes_left", reformation.left},
                   {"nodes_stayed", reformation.stayed},
                   {"nodes_joined", reformation.joined},
                   {"seconds_from_failure_to_resume", seconds},
                   {"steps_redone", redone.steps},
                   {"seconds_redone", redone.seconds}};
  return result;
}

absl::Status record_reformation(const LaunchReformation& reformation, int64_t resumed_step,
                                int64_t world_size, const DroppedSteps& redone, MetricsLog& metrics) {
  const int64_t now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  const ReformationRecord result =
      reformation_record(reformation, resumed_step, world_size, redone, now_unix_ms);
  fmt::print("{}", result.console_line);
  return metrics.write(result.record);
}

}  // namespace nanoforge
