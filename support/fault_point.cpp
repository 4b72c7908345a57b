// POINT@N with an optional term_ / stop_ prefix; the line the process writes before it stops says which
// variable stopped it, so that a test's log explains the death.
#include "support/fault_point.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace nanoforge {

absl::StatusOr<FaultPoint> FaultPoint::parse(std::string_view variable, const char* value,
                                             std::initializer_list<std::string_view> points) {
  FaultPoint fault;
  if (value == nullptr || *value == '\0') return fault;
  fault.variable_ = std::string(variable);
  fault.value_ = value;
  std::string_view rest = value;
  fault.signal_number_ = SIGKILL;
  if (rest.starts_with("term_")) {
    fault.signal_number_ = SIGTERM;
    rest.remove_prefix(5);
  } else if (rest.starts_with("stop_")) {
    fault.signal_number_ = SIGSTOP;
    rest.remove_prefix(5);
  }
  const size_t at = rest.find('@');
  fault.point_ = std::string(rest.substr(0, at));
  const bool known = std::find(points.begin(), points.end(), fault.point_) != points.end();
  const std::string_view count = at == std::string_view::npos ? "" : rest.substr(at + 1);
  const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), fault.count_);
  if (!known || count.empty() || error != std::errc() || end != count.data() + count.size() ||
      fault.count_ < 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}={}: expected [term_|stop_]POINT@N with POINT one of {} and N >= 1 (a test hook: "
                    "support/fault_point.h); unset it to run without a fault",
                    variable, value, fmt::join(points, ", ")));
  }
  return fault;
}

absl::StatusOr<FaultPoint> FaultPoint::from_environment(std::string_view variable,
                                                        std::initializer_list<std::string_view> points) {
  return parse(variable, std::getenv(std::string(variable).c_str()), points);
}

bool FaultPoint::names(std::string_view point, int64_t count) const {
  return signal_number_ != 0 && point == point_ && count == count_;
}

void FaultPoint::pass(std::string_view point, int64_t count) const {
  if (!names(point, count)) return;
  const char* signal_name = signal_number_ == SIGKILL   ? "SIGKILL"
                            : signal_number_ == SIGTERM ? "SIGTERM"
                                                        : "SIGSTOP";
  fmt::print(stderr, "nanoforge: {}={}: {} at this fault point\n", variable_, value_, signal_name);
  std::fflush(stderr);
  std::raise(signal_number_);
}

}  // namespace nanoforge
