// `nanoforge report RUN_DIR [RUN_DIR ...] --out FILE.html|DIR`: one self-contained HTML page of one run or
// several overlaid — curves, time per step, configs side by side, checkpoints, CORE tasks and samples
// (cli/report/run_report.h). It reads the run directories only, so it works on a run still training; its
// output may be none of the files it reads (the probe's `--out RUN/metrics.jsonl` replaced the run's
// metrics).
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/report/run_report.h"
#include "support/output_path.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// Whether `path`, made absolute without links, lies inside `directory` (resolved likewise).
bool is_inside(const std::string& path, const std::string& directory) {
  std::error_code error;
  const std::filesystem::path root = std::filesystem::canonical(directory, error);
  if (error) return false;  // no such directory
  std::filesystem::path resolved = std::filesystem::absolute(path, error);
  if (!error) resolved = std::filesystem::weakly_canonical(resolved, error);
  if (error) return false;  // a path that cannot be resolved fails, naming its reason, when written
  return std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end()).first == root.end();
}

// --out may not be a file a run holds that the report reads — metrics.jsonl, config.toml, core.json, a file
// of a checkpoint — nor lie inside its checkpoints/: the rename that publishes the page would replace it.
absl::Status check_output_is_no_input(const std::string& out, const std::vector<RunRecords>& runs) {
  for (const RunRecords& run : runs) {
    std::vector<std::string> inputs = {run.dir + "/metrics.jsonl", run.dir + "/config.toml",
                                       run.dir + "/core.json"};
    inputs.insert(inputs.end(), run.files.begin(), run.files.end());
    for (const std::string& input : inputs) {
      if (same_existing_file(out, input)) {
        return absl::InvalidArgumentError(fmt::format(
            "--out {} is {}, which the report reads: the page would replace it; give another file (e.g. {}/"
            "report.html)",
            out, input, run.dir));
      }
    }
    if (is_inside(out, run.dir + "/checkpoints")) {
      return absl::InvalidArgumentError(fmt::format(
          "--out {} is inside {}/checkpoints, the run's checkpoints: give a file outside it (e.g. {}/"
          "report.html)",
          out, run.dir, run.dir));
    }
  }
  return absl::OkStatus();
}

// --out as a file: a directory (e.g. the run's) gets report.html in it.
absl::StatusOr<std::string> report_file(const std::string& out) {
  std::error_code error;
  if (std::filesystem::is_directory(out, error)) return (std::filesystem::path(out) / "report.html").string();
  if (out.back() == '/') {
    return absl::InvalidArgumentError(
        fmt::format("--out {}: no such directory; create it, or give the page's file name", out));
  }
  return out;
}

absl::Status run_report_command(const std::vector<std::string>& run_dirs) {
  if (run_dirs.empty() || absl::GetFlag(FLAGS_out).empty()) {
    return absl::InvalidArgumentError(
        "give one or more run directories and --out FILE.html or DIR (see nanoforge report --help)");
  }
  NANOFORGE_ASSIGN_OR_RETURN(const std::string out, report_file(absl::GetFlag(FLAGS_out)));
  NANOFORGE_RETURN_IF_ERROR(check_output_file_path(out));
  std::vector<RunRecords> runs;
  for (const std::string& run_dir : run_dirs) {
    NANOFORGE_ASSIGN_OR_RETURN(RunRecords run, read_run_records(run_dir));
    for (const std::string& note : run.notes)
      fmt::print(stderr, "warning: report: left out: {}\n", note);
    runs.push_back(std::move(run));
  }
  NANOFORGE_RETURN_IF_ERROR(check_output_is_no_input(out, runs));
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
      "RUN_DIR [RUN_DIR ...] --out FILE.html|DIR   (a directory, e.g. a run's, gets report.html)",
      {"out"},
      run_report_command,
      /*takes_arguments=*/true};
}

}  // namespace nanoforge
