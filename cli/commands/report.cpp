// `nanoforge report RUN_DIR [RUN_DIR ...] --out report.html`: one self-contained HTML page of one run or
// several overlaid — curves, time per step, configs side by side, checkpoints, CORE tasks and samples
// (cli/report/run_report.h). It reads the run directories only, so it works on a run still training.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/report/run_report.h"
#include "support/output_path.h"
#include "support/status.h"

namespace nanoforge {
namespace {

absl::Status run_report_command(const std::vector<std::string>& run_dirs) {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (run_dirs.empty() || out.empty()) {
    return absl::InvalidArgumentError(
        "give one or more run directories and --out FILE.html (see nanoforge report --help)");
  }
  NANOFORGE_RETURN_IF_ERROR(check_output_file_path(out));
  std::vector<RunRecords> runs;
  for (const std::string& run_dir : run_dirs) {
    NANOFORGE_ASSIGN_OR_RETURN(RunRecords run, read_run_records(run_dir));
    runs.push_back(std::move(run));
  }
  NANOFORGE_RETURN_IF_ERROR(write_file_atomically(out, run_report_html(runs)));
  fmt::print("report: {} run{} -> {}\n", runs.size(), runs.size() == 1 ? "" : "s", out);
  return absl::OkStatus();
}

}  // namespace

Command report_command() {
  return {
      "report",
      "one self-contained HTML page of one or several runs (curves as SVG, configs compared, checkpoints, "
      "samples)",
      "RUN_DIR [RUN_DIR ...] --out report.html",
      {"out"},
      run_report_command,
      /*takes_arguments=*/true};
}

}  // namespace nanoforge
