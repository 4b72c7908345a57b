// compare_with_expected. Tolerances:
//  - rtol 1e-4: nanochat's fp32 run and ours sum the same products in different orders; fp32 reduction
//    noise over these sizes is ~1e-6 relative, so 1e-4 leaves room without hiding a wrong formula (those
//    show up as errors of 1e-2 and more). It is the rule of the parity README.
//  - atol 1e-7: some gradients are zero up to rounding, e.g. backout_lambda when the backout snapshot is
//    the last block's output (n_layer <= 2): the final RMSNorm is scale-invariant, so dL/dlambda is of the
//    order of eps = 1.2e-7 times the loss gradient, and the stored golden is fp32 noise of that size
//    (PyTorch's own fp64 value has the other sign). Gradients that matter are >= 1e-4 in these cases, where
//    1e-7 adds at most 1e-3 relative.
//  - FP8 cases: the loss by the rule above; a tensor outside it passes when ||got - expected|| <= 0.5 x
//    ||full precision - expected|| (Frobenius), i.e. the FP8 run is at least twice closer to nanochat's FP8
//    numbers than the same model without FP8. Why not 1e-4 everywhere: an fp32 rounding difference of one ulp
//    in an activation (our sums and PyTorch's run in other orders) moves x * scale across an FP8 rounding
//    midpoint for about one element in 10^5; that element's code then differs by one FP8 step (6-25 %), which
//    attention carries to the later tokens. The committed GQA case has no such element (it matches to 1e-6);
//    the MHA case has a few (ratios 0.09-0.34 measured).
#include "parity/model_parity_compare.h"

#include <fmt/format.h>

#include <cmath>

#include "h5/file.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr double kRelativeTolerance = 1e-4;
constexpr double kAbsoluteTolerance = 1e-7;
constexpr double kFp8DistanceRatio = 0.5;

double frobenius_distance(const HostArray<float>& a, const HostArray<float>& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = static_cast<double>(a.values[i]) - b.values[i];
    sum += d * d;
  }
  return std::sqrt(sum);
}

// The FP8 rule for a tensor the plain rule failed (same shape, finite): distances instead of max errors.
void apply_fp8_rule(TensorCheck& check, const HostArray<float>& got, const HostArray<float>& full_precision,
                    const HostArray<float>& expected) {
  if (!check.problem.empty() || check.passed || full_precision.shape != expected.shape) return;
  const double distance = frobenius_distance(got, expected);
  const double allowed = kFp8DistanceRatio * frobenius_distance(full_precision, expected);
  check.max_error = distance;
  check.tolerance = allowed;
  check.passed = distance <= allowed;
  check.problem = "FP8 rule: Frobenius distance vs half the full-precision run's";
}

TensorCheck compare_tensor(std::string name, const HostArray<float>& got, const HostArray<float>& expected) {
  TensorCheck check;
  check.name = std::move(name);
  if (got.shape != expected.shape) {
    check.problem = fmt::format("shape ({}) but expected ({})", fmt::join(got.shape, ", "),
                                fmt::join(expected.shape, ", "));
    return check;
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.values[i], e = expected.values[i];
    if (!std::isfinite(g)) {
      check.problem = fmt::format("non-finite value {} at element {}", g, i);
      return check;
    }
    check.max_error = std::max(check.max_error, std::abs(g - e));
    check.max_expected = std::max(check.max_expected, std::abs(e));
  }
  check.tolerance = kAbsoluteTolerance + kRelativeTolerance * check.max_expected;
  check.passed = check.max_error <= check.tolerance;
  return check;
}

}  // namespace

absl::StatusOr<bool> has_expected(const std::string& case_path) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(case_path));
  return file.has("/expected");
}

absl::StatusOr<std::vector<TensorCheck>> compare_with_expected(const std::string& case_path,
                                                               const ParityResult& result,
                                                               const ParityResult* full_precision) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(case_path));
  std::vector<TensorCheck> checks;
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> expected_loss, file.read<float>("/expected/loss"));
  HostArray<float> loss;
  loss.shape = expected_loss.shape;
  loss.values.assign(static_cast<size_t>(expected_loss.numel()), static_cast<float>(result.loss));
  checks.push_back(compare_tensor("loss", loss, expected_loss));
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> expected_logits, file.read<float>("/expected/logits"));
  checks.push_back(compare_tensor("logits", result.logits, expected_logits));
  if (full_precision != nullptr)
    apply_fp8_rule(checks.back(), result.logits, full_precision->logits, expected_logits);
  for (const auto& [name, grad] : result.grads) {
    const std::string dataset = "/expected/grads/" + name;
    if (!file.has(dataset)) {
      TensorCheck missing;
      missing.name = "grads/" + name;
      missing.problem = "no expected gradient in the case file";
      checks.push_back(missing);
      continue;
    }
    NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> expected, file.read<float>(dataset));
    checks.push_back(compare_tensor("grads/" + name, grad, expected));
    if (full_precision != nullptr)
      apply_fp8_rule(checks.back(), grad, full_precision->grads.at(name), expected);
  }
  return checks;
}

}  // namespace nanoforge
