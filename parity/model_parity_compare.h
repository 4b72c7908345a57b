// Comparing a parity result with the /expected values nanochat's PyTorch model stored in the case file,
// tensor by tensor: max|got - expected| <= atol + rtol * max|expected|, and no NaN/Inf, missing tensor or
// wrong shape. The tolerances and their reasons are in parity_compare.cpp.
#pragma once

#include <absl/status/statusor.h>

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

// One check per tensor of the result: loss, logits, then every gradient. For an FP8 case pass the same case
// run without FP8 as `full_precision`: a tensor outside the rule above then still passes when its distance
// from nanochat's (Frobenius) is at most half that of the full-precision run (model_parity_compare.cpp).
absl::StatusOr<std::vector<TensorCheck>> compare_with_expected(const std::string& case_path,
                                                               const ParityResult& result,
                                                               const ParityResult* full_precision = nullptr);

}  // namespace nanoforge
