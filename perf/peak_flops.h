// Peak dense bf16 FLOP/s per device, the one table MFU is computed from (nanochat's get_peak_flops, plus
// GB10). A device is matched by lower-cased substrings of its name, first match wins; the CPU and unknown
// devices have no peak and report MFU as n/a rather than a made-up number.
#pragma once

#include <optional>
#include <string>

namespace nanoforge {

struct DevicePeak {
  std::string label;  // the table row that matched, e.g. "h100"
  double flops_per_second = 0;
};

std::optional<DevicePeak> peak_flops(const std::string& device_name);

// Model FLOPs utilisation in percent: achieved FLOP/s over peak * devices; nullopt without a peak.
std::optional<double> mfu_percent(double tokens_per_second, double flops_per_token,
                                  const std::string& device_name, int devices);

}  // namespace nanoforge
