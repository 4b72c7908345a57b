// Comparing a parity result with the /expected values nanochat's PyTorch model stored in the case file,
// tensor by tensor: max|got - expected| <= atol + rtol * max|expected|, and no NaN/Inf, missing tensor or
// wrong shape; an FP8 case, within the spread of our own FP8 runs. The tolerances and their reasons are in
// model_parity_compare.cpp.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "parity/model_parity.h"

namespace nanoforge {

struct TensorCheck {
  std::string name;  // "loss", "logits", "grads/<parameter>"
  double max_error = 0;
  double max_expected = 0;
  double tolerance = 0;
  bool passed = false;
  std::string problem;  // why it failed when it is not the error size (shape, NaN, missing)
};

// Whether the case file carries /expected values to compare with.
absl::StatusOr<bool> has_expected(const std::string& case_path);

// nanochat's numbers from a case file's /expected: the loss, the softcapped logits, the gradients by name.
struct ExpectedValues {
  HostArray<float> loss;
  HostArray<float> logits;
  std::map<std::string, HostArray<float>> grads;
};
absl::StatusOr<ExpectedValues> read_expected(const std::string& case_path);

// The case with every weight scaled by 1 + 2^-20 or 1 - 2^-20 (a coin seeded with `seed`): the same model to
// ~1e-6, with other fp32 rounding everywhere downstream.
ParityCase nudged_case(const ParityCase& parity_case, uint64_t seed);

// How far correct FP8 results of a case land apart: per tensor ("loss", "logits", "grads/<name>"), the
// largest Frobenius distance of our FP8 run of nudged_case(seed), for a few seeds, from our FP8 result of the
// case.
struct Fp8Spread {
  std::map<std::string, double> by_tensor;
};
Fp8Spread measure_fp8_spread(const ParityCase& parity_case, const ParityResult& fp8_result);

// One check per tensor of the result: loss, logits, then every gradient. For an FP8 case pass its spread: a
// tensor outside the plain rule then still passes when its distance from nanochat's (Frobenius) is within a
// few times its spread (model_parity_compare.cpp says why).
std::vector<TensorCheck> compare_with_expected(const ExpectedValues& expected, const ParityResult& result,
                                               const Fp8Spread* fp8_spread = nullptr);
absl::StatusOr<std::vector<TensorCheck>> compare_with_expected(const std::string& case_path,
                                                               const ParityResult& result,
                                                               const Fp8Spread* fp8_spread = nullptr);

}  // namespace nanoforge
