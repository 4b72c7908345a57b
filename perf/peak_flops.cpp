// The peak table: nanochat's common.get_peak_flops rows for the GPUs its users have, and GB10 (DGX Spark).
// GB10's dense bf16 peak with fp32 accumulation is 125 TFLOP/s: NVIDIA's DGX Spark specification gives
// "1 PFLOP of FP4 AI performance" with 2:4 sparsity, so 500 TFLOP/s dense FP4, and each doubling of the
// operand width halves the tensor-core rate (250 FP8, 125 bf16); measured bf16 GEMMs on a Spark reach about
// 92. (The 209 TFLOP/s once used here, from nanochat's GB10 pull request #722, is the RTX 5090's 209.5.)
#include "perf/peak_flops.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace nanoforge {
namespace {

struct PeakRow {
  std::vector<std::string> substrings;  // all must occur in the lower-cased name
  double flops_per_second;
};

const std::vector<PeakRow>& peak_table() {
  static const std::vector<PeakRow> table = {
      {{"gb200"}, 2.5e15},        {{"grace blackwell"}, 2.5e15},
      {{"b200"}, 2.25e15},        {{"b100"}, 1.8e15},
      {{"gb10"}, 125e12},         {{"h200", "nvl"}, 836e12},
      {{"h200", "pcie"}, 836e12}, {{"h200"}, 989e12},
      {{"h100", "nvl"}, 835e12},  {{"h100", "pcie"}, 756e12},
      {{"h100"}, 989e12},         {{"h800", "nvl"}, 989e12},
      {{"h800"}, 756e12},         {{"a100"}, 312e12},
      {{"a800"}, 312e12},         {{"a40"}, 149.7e12},
      {{"a30"}, 165e12},          {{"l40s"}, 362e12},
      {{"l4"}, 121e12},           {{"5090"}, 209.5e12},
      {{"4090"}, 165.2e12},       {{"3090"}, 71e12},
  };
  return table;
}

}  // namespace

std::optional<DevicePeak> peak_flops(const std::string& device_name) {
  std::string name = device_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const PeakRow& row : peak_table()) {
    const bool all = std::all_of(row.substrings.begin(), row.substrings.end(), [&](const std::string& part) {
      return name.find(part) != std::string::npos;
    });
    if (all) {
      std::string label = row.substrings[0];
      for (size_t i = 1; i < row.substrings.size(); ++i)
        label += " " + row.substrings[i];
      return DevicePeak{label, row.flops_per_second};
    }
  }
  return std::nullopt;
}

std::optional<double> mfu_percent(double tokens_per_second, double flops_per_token,
                                  const std::string& device_name, int devices) {
  const std::optional<DevicePeak> peak = peak_flops(device_name);
  if (!peak || devices < 1) return std::nullopt;
  return 100.0 * tokens_per_second * flops_per_token / (peak->flops_per_second * devices);
}

}  // namespace nanoforge
