// compare_optim_with_golden. The 1e-3 relative term is the README's allowance for fp32 reduction order in
// Polar Express and the norms (its products cancel heavily); the ulp term covers weights that barely move.
#include "parity/optim_parity_compare.h"

#include <fmt/format.h>

#include <cmath>

#include "h5/file.h"
#include "support/status.h"

namespace nanoforge {
namespace {

double float_ulp(double magnitude) {
  const float value = static_cast<float>(magnitude);
  return static_cast<double>(std::nextafter(value, INFINITY) - value);
}

}  // namespace

absl::StatusOr<std::vector<TensorCheck>> compare_optim_with_golden(
    const OptimGolden& golden, const std::vector<std::map<std::string, HostArray<float>>>& weights_after) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(golden.path));
  // Which Muon group each parameter is in, and the sum of lr_eff * wd it has seen (the flip allowance).
  std::map<std::string, std::string> muon_group_of;
  for (size_t g = 0; g < golden.groups.size(); ++g) {
    if (golden.groups[g].kind != "muon") continue;
    for (const std::string& name : golden.groups[g].params)
      muon_group_of[name] = fmt::format("{:02d}", g);
  }
  std::map<std::string, double> decay_sum;

  std::vector<TensorCheck> checks;
  std::map<std::string, HostArray<float>> before = golden.weights_before;
  for (size_t k = 0; k < golden.steps.size() && k < weights_after.size(); ++k) {
    std::map<std::string, double> step_decay;  // lr_eff * wd of each Muon group at this step
    for (const auto& [name, group] : muon_group_of) {
      if (step_decay.count(group)) continue;
      const std::string path = fmt::format("/steps/{}/groups/{}", k, group);
      NANOFORGE_ASSIGN_OR_RETURN(const double lr_effective, file.read_float_attribute(path, "lr_effective"));
      NANOFORGE_ASSIGN_OR_RETURN(const double weight_decay, file.read_float_attribute(path, "weight_decay"));
      step_decay[group] = lr_effective * weight_decay;
    }
    for (const auto& [group, decay] : step_decay)
      decay_sum[group] += decay;

    std::map<std::string, HostArray<float>> expected_step;
    for (const auto& [name, got] : weights_after[k]) {
      TensorCheck check;
      check.name = fmt::format("steps/{}/{}", k, name);
      const std::string dataset = fmt::format("/steps/{}/weights_after/{}", k, name);
      NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> expected, file.read<float>(dataset));
      const HostArray<float>& previous = before.at(name);
      if (expected.shape != got.shape) {
        check.problem = "shape differs from the golden";
        checks.push_back(check);
        continue;
      }
      const auto muon = muon_group_of.find(name);
      if (muon != muon_group_of.end() && golden.ortho_dtype == "bfloat16") {
        double error_squares = 0, change_squares = 0;
        for (int64_t i = 0; i < expected.numel(); ++i) {
          error_squares += std::pow(double{got.values[i]} - expected.values[i], 2);
          change_squares += std::pow(double{expected.values[i]} - previous.values[i], 2);
        }
        check.max_error = std::sqrt(error_squares);
        check.max_expected = std::sqrt(change_squares);
        check.tolerance = 0.5 * check.max_expected;
        check.passed = std::isfinite(check.max_error) && check.max_error <= check.tolerance;
        check.problem = "Frobenius norms: bf16 orthogonalisation";
        checks.push_back(check);
        expected_step.emplace(name, std::move(expected));
        continue;
      }
      double max_expected = 0;
      for (int64_t i = 0; i < expected.numel(); ++i) {
        check.max_expected =
            std::max(check.max_expected, std::abs(double{expected.values[i]} - previous.values[i]));
        max_expected = std::max(max_expected, std::abs(double{expected.values[i]}));
      }
      check.tolerance = 1e-3 * check.max_expected + static_cast<double>(k + 1) * float_ulp(max_expected);
      const double flip_allowance = muon == muon_group_of.end() ? 0.0 : 1.05 * decay_sum[muon->second];
      int64_t flips = 0;
      const int64_t allowed_flips = (expected.numel() + 9999) / 10000;  // ceil(1e-4 * numel)
      bool finite = true;
      for (int64_t i = 0; i < expected.numel(); ++i) {
        const double error = std::abs(double{got.values[i]} - expected.values[i]);
        if (!std::isfinite(got.values[i])) finite = false;
        if (error <= check.tolerance) {
          check.max_error = std::max(check.max_error, error);
          continue;
        }
        const double weight =
            std::max(std::abs(double{previous.values[i]}), std::abs(double{expected.values[i]}));
        if (error <= flip_allowance * weight) {
          ++flips;
        } else {
          check.max_error = std::max(check.max_error, error);
        }
      }
      check.passed = finite && check.max_error <= check.tolerance && flips <= allowed_flips;
      if (!finite) check.problem = "non-finite values";
      if (flips > 0)
        check.problem = fmt::format("{} cautious-decay sign flip(s), {} allowed", flips, allowed_flips);
      checks.push_back(check);
      expected_step.emplace(name, std::move(expected));
    }
    before = std::move(expected_step);
  }
  return checks;
}

}  // namespace nanoforge
