// compare_with_expected: a tensor passes within 1e-7 + 1e-4 max|expected| (fp32 reduction-order noise with a
// wide margin, plus an absolute term for gradients that are zero up to rounding), or, in an FP8 case, when
// ||got - expected|| <= 3 x its FP8 spread (Frobenius): the largest distance from our result of four FP8
// runs with every weight scaled by 1 +- 2^-20. Why these numbers: docs/parity.md, "Comparison rule", and
// docs/fp8.md, "Parity with nanochat".
#include "parity/model_parity_compare.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "h5/file.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr double kRelativeTolerance = 1e-4;
constexpr double kAbsoluteTolerance = 1e-7;
constexpr double kFp8SpreadFactor = 3;
// Four nudged runs: one run of a calm case may flip no code; the spread is the largest of four.
constexpr int kFp8SpreadRuns = 4;
constexpr float kFp8WeightNudge = 0x1p-20f;  // 2^-20: 8-16 float32 ulps

double frobenius_distance(const HostArray<float>& a, const HostArray<float>& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = static_cast<double>(a.values[i]) - b.values[i];
    sum += d * d;
  }
  return std::sqrt(sum);
}

HostArray<float> scalar_array(double value, const std::vector<int64_t>& shape) {
  HostArray<float> array;
  array.shape = shape;
  array.values.assign(static_cast<size_t>(HostArray<float>::count(shape)), static_cast<float>(value));
  return array;
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

// The FP8 rule for a tensor the plain rule failed (same shape, finite): its distance from nanochat's FP8
// against the spread of our own FP8 runs.
void apply_fp8_rule(TensorCheck& check, const HostArray<float>& got, const HostArray<float>& expected,
                    const Fp8Spread& fp8_spread) {
  if (!check.problem.empty() || check.passed) return;
  check.max_error = frobenius_distance(got, expected);
  check.tolerance = kFp8SpreadFactor * fp8_spread.by_tensor.at(check.name);
  check.passed = check.max_error <= check.tolerance;
  check.problem = fmt::format("FP8 rule: Frobenius distance vs {:g} x the spread of our nudged FP8 runs",
                              kFp8SpreadFactor);
}

TensorCheck check_tensor(std::string name, const HostArray<float>& got, const HostArray<float>& expected,
                         const Fp8Spread* fp8_spread) {
  TensorCheck check = compare_tensor(std::move(name), got, expected);
  if (fp8_spread != nullptr) apply_fp8_rule(check, got, expected, *fp8_spread);
  return check;
}

}  // namespace

ParityCase nudged_case(const ParityCase& parity_case, uint64_t seed) {
  ParityCase nudged = parity_case;
  std::mt19937_64 coin(seed);  // its raw output is the same on every standard library
  for (auto& [name, weight] : nudged.weights) {
    for (float& w : weight.values)
      w *= (coin() & 1) != 0 ? 1.0f + kFp8WeightNudge : 1.0f - kFp8WeightNudge;
  }
  return nudged;
}

Fp8Spread measure_fp8_spread(const ParityCase& parity_case, const ParityResult& fp8_result) {
  Fp8Spread spread;
  auto widen = [&spread](const std::string& name, const HostArray<float>& a, const HostArray<float>& b) {
    double& largest = spread.by_tensor[name];
    largest = std::max(largest, frobenius_distance(a, b));
  };
  for (int run = 1; run <= kFp8SpreadRuns; ++run) {
    const ParityResult nudged = run_parity(nudged_case(parity_case, static_cast<uint64_t>(run)), DType::kF32);
    widen("loss", scalar_array(nudged.loss, {}), scalar_array(fp8_result.loss, {}));
    widen("logits", nudged.logits, fp8_result.logits);
    for (const auto& [name, grad] : fp8_result.grads)
      widen("grads/" + name, nudged.grads.at(name), grad);
  }
  return spread;
}

absl::StatusOr<bool> has_expected(const std::string& case_path) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(case_path));
  return file.has("/expected");
}

absl::StatusOr<ExpectedValues> read_expected(const std::string& case_path) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(case_path));
  ExpectedValues expected;
  NANOFORGE_ASSIGN_OR_RETURN(expected.loss, file.read<float>("/expected/loss"));
  NANOFORGE_ASSIGN_OR_RETURN(expected.logits, file.read<float>("/expected/logits"));
  if (!file.has("/expected/grads")) return expected;  // each gradient is then reported missing
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> names, file.members("/expected/grads"));
  for (const std::string& name : names) {
    NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> grad, file.read<float>("/expected/grads/" + name));
    expected.grads.emplace(name, std::move(grad));
  }
  return expected;
}

std::vector<TensorCheck> compare_with_expected(const ExpectedValues& expected, const ParityResult& result,
                                               const Fp8Spread* fp8_spread) {
  std::vector<TensorCheck> checks;
  checks.push_back(
      check_tensor("loss", scalar_array(result.loss, expected.loss.shape), expected.loss, fp8_spread));
  checks.push_back(check_tensor("logits", result.logits, expected.logits, fp8_spread));
  for (const auto& [name, grad] : result.grads) {
    const auto stored = expected.grads.find(name);
    if (stored == expected.grads.end()) {
      TensorCheck missing;
      missing.name = "grads/" + name;
      missing.problem = "no expected gradient in the case file";
      checks.push_back(missing);
      continue;
    }
    checks.push_back(check_tensor("grads/" + name, grad, stored->second, fp8_spread));
  }
  return checks;
}

absl::StatusOr<std::vector<TensorCheck>> compare_with_expected(const std::string& case_path,
                                                               const ParityResult& result,
                                                               const Fp8Spread* fp8_spread) {
  NANOFORGE_ASSIGN_OR_RETURN(const ExpectedValues expected, read_expected(case_path));
  return compare_with_expected(expected, result, fp8_spread);
}

}  // namespace nanoforge
