// The registry of flag limits and the check run_cli makes.
#include "cli/flag_limits.h"

#include <absl/flags/commandlineflag.h>
#include <absl/flags/reflection.h>
#include <absl/strings/numbers.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nanoforge {
namespace {

std::vector<FlagLimit>& registry() {
  static std::vector<FlagLimit> limits;
  return limits;
}

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

bool register_flag_limit(const FlagLimit& limit) {
  registry().push_back(limit);
  return true;
}

absl::Status check_flag_limits(const std::vector<std::string>& flag_names) {
  for (const FlagLimit& limit : registry()) {
    if (std::find(flag_names.begin(), flag_names.end(), limit.name) == flag_names.end()) continue;
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(limit.name);
    if (flag == nullptr) continue;
    const std::string text = flag->CurrentValue();
    double value = NAN;
    if (!absl::SimpleAtod(text, &value)) value = NAN;
    if (limit.unset && value == *limit.unset) continue;
    if (value >= limit.min && value <= limit.max) continue;
    return absl::InvalidArgumentError(fmt::format("--{} {}: must be in [{}, {}]{}{}", dashed(limit.name),
                                                  text, limit.min, limit.max, *limit.meaning ? " " : "",
                                                  limit.meaning));
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
