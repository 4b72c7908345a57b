// `nanoforge parity --case CASE.h5 --out RESULT.h5` runs a model parity case (parity/model_parity.h);
// `nanoforge parity --optim GOLDEN.h5 --out RESULT.h5` replays an optimizer golden (parity/optim_parity.h),
// also under mpirun: the sharded optimizer of N ranks against nanochat. When the input carries nanochat's
// expected values, a per-tensor comparison is printed and a mismatch fails.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "dist/create_communicator.h"
#include "kernels/backend_info.h"
#include "parity/model_parity.h"
#include "parity/model_parity_compare.h"
#include "parity/optim_parity.h"
#include "parity/optim_parity_compare.h"
#include "support/output_path.h"
#include "support/status.h"

ABSL_FLAG(std::string, case, "", "model parity case (HDF5: /config, /weights, /inputs, optional /expected)");
ABSL_FLAG(std::string, optim, "", "optimizer golden (HDF5: /optim_config, /weights_before, /steps/<k>)");
ABSL_FLAG(std::string, precision, "f32", "CPU precision of a model case: f32 (the reference backend) or f64");

namespace nanoforge {
namespace {

// Prints the table and turns failures into an error.
absl::Status report(const std::vector<TensorCheck>& checks) {
  int failures = 0;
  fmt::print("{:<56} {:>11} {:>11} {:>11}\n", "tensor", "max|error|", "scale", "tolerance");
  for (const TensorCheck& check : checks) {
    failures += check.passed ? 0 : 1;
    fmt::print("{:<56} {:>11.3e} {:>11.3e} {:>11.3e}  {}{}\n", check.name, check.max_error,
               check.max_expected, check.tolerance, check.passed ? "ok" : "FAIL",
               check.problem.empty() ? "" : " (" + check.problem + ")");
  }
  if (failures > 0) {
    return absl::FailedPreconditionError(
        fmt::format("{} of {} tensors differ from the expected values", failures, checks.size()));
  }
  fmt::print("all {} tensors match the expected values\n", checks.size());
  return absl::OkStatus();
}

absl::Status run_model_case(const std::string& case_path, const std::string& out_path) {
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "f32" && precision != "f64") {
    return absl::InvalidArgumentError(fmt::format("--precision must be f32 or f64, got '{}'", precision));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const ParityCase parity_case, read_parity_case(case_path));
  if (parity_case.fp8 && precision == "f64") {
    return absl::InvalidArgumentError(fmt::format(
        "{} is an FP8 case (/config@fp8 = 1): FP8 runs in f32 only; drop --precision f64", case_path));
  }
  fmt::print("case {}: {}{}, batch {} x {} tokens\n", case_path, parity_case.config.describe(),
             parity_case.fp8 ? ", FP8" : "", parity_case.idx.shape[0], parity_case.idx.shape[1]);
  const ParityResult result = run_parity(parity_case, precision == "f64" ? DType::kF64 : DType::kF32);
  NANOFORGE_RETURN_IF_ERROR(write_parity_result(out_path, result));
  fmt::print("loss {:.7f}; wrote {}\n", result.loss, out_path);
  NANOFORGE_ASSIGN_OR_RETURN(const bool expected, has_expected(case_path));
  if (!expected) {
    fmt::print("the case has no /expected values: nothing to compare\n");
    return absl::OkStatus();
  }
  if (!parity_case.fp8) {
    NANOFORGE_ASSIGN_OR_RETURN(const std::vector<TensorCheck> checks,
                               compare_with_expected(case_path, result));
    return report(checks);
  }
  // An FP8 case is run again with its weights nudged: the yardstick of its comparison
  // (model_parity_compare.h).
  const Fp8Spread spread = measure_fp8_spread(parity_case, result);
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<TensorCheck> checks,
                             compare_with_expected(case_path, result, &spread));
  return report(checks);
}

absl::Status run_optim_golden(const std::string& golden_path, const std::string& out_path) {
  NANOFORGE_ASSIGN_OR_RETURN(const OptimGolden golden, read_optim_golden(golden_path));
  // Under mpirun the replay runs sharded over the ranks (what training does); rank 0 reports.
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> communicator,
                             create_communicator(Device::kCpu, DistOptions{}));
  NANOFORGE_ASSIGN_OR_RETURN(const auto weights_after, run_optim_parity(golden, *communicator));
  if (communicator->rank() != 0) return absl::OkStatus();
  fmt::print("optimizer golden {}: {}, {} groups, {} steps, replayed on {} rank{} ({})\n", golden_path,
             golden.config.describe(), golden.groups.size(), golden.steps.size(), communicator->world_size(),
             communicator->world_size() > 1 ? "s" : "", communicator->engine_name());
  NANOFORGE_RETURN_IF_ERROR(write_optim_result(out_path, weights_after));
  fmt::print("wrote {}\n", out_path);
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<TensorCheck> checks,
                             compare_optim_with_golden(golden, weights_after));
  return report(checks);
}

absl::Status run_parity_command(const std::vector<std::string>& /*arguments*/) {
  const std::string case_path = absl::GetFlag(FLAGS_case), optim_path = absl::GetFlag(FLAGS_optim);
  const std::string out_path = absl::GetFlag(FLAGS_out);
  if (case_path.empty() == optim_path.empty() || out_path.empty()) {
    return absl::InvalidArgumentError(
        "give --out and exactly one of --case (a model case) or --optim (an optimizer golden); see nanoforge "
        "parity --help");
  }
  const std::string& input = case_path.empty() ? optim_path : case_path;
  if (same_existing_file(out_path, input)) {
    return absl::InvalidArgumentError(fmt::format(
        "--out {} is the {} file itself: the results would replace what they are checked against; give "
        "another path",
        out_path, case_path.empty() ? "--optim" : "--case"));
  }
  NANOFORGE_RETURN_IF_ERROR(check_output_file_path(out_path));  // before the work, not at the write
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  return case_path.empty() ? run_optim_golden(optim_path, out_path) : run_model_case(case_path, out_path);
}

}  // namespace

Command parity_command() {
  return {"parity",
          "check the model or the optimizer against nanochat's PyTorch numbers",
          "(--case CASE.h5 | --optim GOLDEN.h5) --out RESULT.h5 [--precision f32|f64] [--threads N]",
          {"case", "optim", "out", "precision", "threads"},
          run_parity_command};
}

}  // namespace nanoforge
