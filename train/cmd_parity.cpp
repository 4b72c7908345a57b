// `nanoforge parity --case CASE.h5 --out RESULT.h5`: runs a parity case (see train/parity.h) and, when the
// case carries nanochat's expected values, prints a per-tensor comparison and fails on a mismatch.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include "kernels/backend_info.h"
#include "support/status.h"
#include "train/command.h"
#include "train/common_flags.h"
#include "train/parity.h"
#include "train/parity_compare.h"

ABSL_FLAG(std::string, case, "", "parity case file (HDF5: /config, /weights, /inputs, optional /expected)");
ABSL_FLAG(std::string, out, "", "result file to write (HDF5: /loss, /logits, /grads/<name>)");
ABSL_FLAG(std::string, precision, "f32", "CPU precision to run in: f32 (the reference backend) or f64");

namespace nanoforge {
namespace {

absl::Status run_parity_command() {
  const std::string case_path = absl::GetFlag(FLAGS_case);
  const std::string out_path = absl::GetFlag(FLAGS_out);
  if (case_path.empty() || out_path.empty()) {
    return absl::InvalidArgumentError("--case and --out are both required (see nanoforge parity --help)");
  }
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "f32" && precision != "f64") {
    return absl::InvalidArgumentError(fmt::format("--precision must be f32 or f64, got '{}'", precision));
  }
  set_cpu_threads(absl::GetFlag(FLAGS_threads));

  NANOFORGE_ASSIGN_OR_RETURN(const ParityCase parity_case, read_parity_case(case_path));
  fmt::print("case {}: {}, batch {} x {} tokens\n", case_path, parity_case.config.describe(),
             parity_case.idx.shape[0], parity_case.idx.shape[1]);
  const ParityResult result = run_parity(parity_case, precision == "f64" ? DType::kF64 : DType::kF32);
  NANOFORGE_RETURN_IF_ERROR(write_parity_result(out_path, result));
  fmt::print("loss {:.7f}; wrote {}\n", result.loss, out_path);

  NANOFORGE_ASSIGN_OR_RETURN(const bool expected, has_expected(case_path));
  if (!expected) {
    fmt::print("the case has no /expected values: nothing to compare\n");
    return absl::OkStatus();
  }
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<TensorCheck> checks, compare_with_expected(case_path, result));
  int failures = 0;
  fmt::print("{:<48} {:>11} {:>11} {:>11}  {}\n", "tensor", "max|error|", "max|expect|", "tolerance", "");
  for (const TensorCheck& check : checks) {
    failures += check.passed ? 0 : 1;
    fmt::print("{:<48} {:>11.3e} {:>11.3e} {:>11.3e}  {}{}\n", check.name, check.max_error,
               check.max_expected, check.tolerance, check.passed ? "ok" : "FAIL",
               check.problem.empty() ? "" : " " + check.problem);
  }
  if (failures > 0) {
    return absl::FailedPreconditionError(
        fmt::format("{} of {} tensors differ from the case's expected values", failures, checks.size()));
  }
  fmt::print("all {} tensors match the case's expected values\n", checks.size());
  return absl::OkStatus();
}

}  // namespace

Command parity_command() {
  return {"parity",
          "run a model parity case (nanochat's PyTorch numbers) and compare",
          "--case CASE.h5 --out RESULT.h5 [--precision f32|f64] [--threads N]",
          {"case", "out", "precision", "threads"},
          run_parity_command};
}

}  // namespace nanoforge
