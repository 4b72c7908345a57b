// Comparing replayed optimizer steps with the golden's weights_after, by the parity README's rule: per
// tensor and step k, |got - expected| <= 1e-3 * max|expected - before| + (k+1) fp32 ulps of max|expected|,
// where Muon's cautious weight decay may decide a near-zero update's sign the other way for up to
// ceil(1e-4 * numel) elements, each within 1.05 * sum over steps of lr_eff * wd * |w|. For a golden whose
// orthogonalisation ran in bf16, Muon tensors are compared by Frobenius norms instead:
// ||got - expected|| <= 0.5 * ||expected - before|| (bf16 Polar Express cancels heavily: 6-24 % relative
// error against float64 was measured).
#pragma once

#include <absl/status/statusor.h>

#include <map>
#include <string>
#include <vector>

#include "parity/model_parity_compare.h"
#include "parity/optim_parity.h"

namespace nanoforge {

absl::StatusOr<std::vector<TensorCheck>> compare_optim_with_golden(
    const OptimGolden& golden, const std::vector<std::map<std::string, HostArray<float>>>& weights_after);

}  // namespace nanoforge
