// The range of every numeric flag, declared next to the flag (NANOFORGE_FLAG_LIMIT after its ABSL_FLAG) and
// checked by run_cli for the command's flags before the command starts any work: a flag outside its range is
// refused with its name, its value and the range, never passed on to allocate, spin or crash. Checks that
// need more than the value (a batch that must fit in memory, tokens that must exist) are the command's own.
#pragma once

#include <absl/status/status.h>

#include <optional>
#include <string>
#include <vector>

namespace nanoforge {

struct FlagLimit {
  const char* name;                            // the absl flag name (underscores)
  double min, max;                             // inclusive; NaN is never inside
  const char* meaning = "";                    // shown after the range, e.g. "(0: all cores)"
  std::optional<double> unset = std::nullopt;  // a value that means "not given" and is always accepted
};

// Registers a limit (at static initialisation); returns true.
bool register_flag_limit(const FlagLimit& limit);
// Checks the current values of `flag_names` that have a limit.
absl::Status check_flag_limits(const std::vector<std::string>& flag_names);

}  // namespace nanoforge

#define NANOFORGE_FLAG_LIMIT(flag, ...)                            \
  [[maybe_unused]] static const bool nanoforge_flag_limit_##flag = \
      ::nanoforge::register_flag_limit({#flag, __VA_ARGS__})
