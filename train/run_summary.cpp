// summarize_run: one pass over metrics.jsonl with simdjson (a line that is no record of the trainer's is
// skipped), then this process's peak memory: nanoforge's buffer accounting and the kernel's max RSS.
#include "train/run_summary.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <string_view>

#include "kernels/device_buffer.h"
#include "support/number_format.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge {
namespace {

struct StepFigure {
  int64_t step = 0;
  double value = 0;
};

// What metrics.jsonl says about the whole run.
struct RecordedRun {
  int64_t steps = 0;
  int64_t tokens = 0;
  double step_seconds = 0;                  // the training steps' own time
  double mfu_seconds = 0, mfu_by_time = 0;  // over the steps that have an MFU: time, and MFU x time
  std::optional<StepFigure> min_val_bpb, last_core;
  // `nanoforge launch`'s re-formations (train/reformation_record.h): after a failure, or to take in a machine
  int64_t restarts = 0, joins = 0, steps_redone = 0;
  double reforming_seconds = 0, redone_seconds = 0;
};

std::optional<double> number_field(simdjson::dom::object& record, const char* key) {
  double value = 0;
  if (record[key].get_double().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

// The run's figures; nullopt when the file cannot be read (removed while the run went on).
std::optional<RecordedRun> read_recorded_run(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  RecordedRun run;
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::object record;
    int64_t step = 0;
    if (parser.parse(line).get_object().get(record) != simdjson::SUCCESS ||
        record["step"].get_int64().get(step) != simdjson::SUCCESS)
      continue;
    if (number_field(record, "loss")) {
      const std::optional<double> step_ms = number_field(record, "step_ms");
      const std::optional<double> tokens_per_s = number_field(record, "tokens_per_s");
      if (!step_ms || !tokens_per_s) continue;
      const double seconds = *step_ms / 1e3;
      ++run.steps;
      run.tokens += std::llround(*tokens_per_s * seconds);  // the step's tokens, from two %.9g figures
      run.step_seconds += seconds;
      if (const std::optional<double> mfu = number_field(record, "mfu")) {
        run.mfu_seconds += seconds;
        run.mfu_by_time += *mfu * seconds;
      }
    } else if (const std::optional<double> bpb = number_field(record, "val_bpb")) {
      if (!run.min_val_bpb || *bpb < run.min_val_bpb->value) run.min_val_bpb = StepFigure{step, *bpb};
    } else if (const std::optional<double> core = number_field(record, "core_metric")) {
      run.last_core = StepFigure{step, *core};
    } else if (std::string_view event;
               record["event"].get_string().get(event) == simdjson::SUCCESS && event == "reformation") {
      std::string_view cause;  // records written before the cause was: failures only
      if (record["cause"].get_string().get(cause) != simdjson::SUCCESS) cause = "failure";
      ++(cause == "join" ? run.joins : run.restarts);
      run.reforming_seconds += number_field(record, "seconds_from_failure_to_resume").value_or(0);
      run.redone_seconds += number_field(record, "seconds_redone").value_or(0);
      int64_t redone = 0;
      if (record["steps_redone"].get_int64().get(redone) == simdjson::SUCCESS) run.steps_redone += redone;
    }
  }
  return run;
}

std::string duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  if (seconds < 3600) return fmt::format("{:.1f}m", seconds / 60);
  return fmt::format("{:.2f}h", seconds / 3600);
}

std::string gigabytes(int64_t bytes) {
  return fmt::format("{:.3f} GB", static_cast<double>(bytes) / 1e9);
}

}  // namespace

RunSummary summarize_run(const RunEnd& end) {
  const std::string metrics_path = end.run_dir + "/metrics.jsonl";
  const std::optional<RecordedRun> recorded = read_recorded_run(metrics_path);
  const RecordedRun run = recorded.value_or(RecordedRun{});
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const int64_t max_rss_bytes = int64_t{usage.ru_maxrss} * 1024;  // Linux counts it in KiB
  const int64_t peak_buffer_bytes = device_bytes_peak(end.device);
  const absl::StatusOr<std::string> checkpoint = latest_checkpoint(end.run_dir);
  const std::string report_command =
      fmt::format("nanoforge report {} --out {}/report.html", end.run_dir, end.run_dir);
  // Wall time and memory are measured by this process; after a resume that is part of the run only.
  const std::string process_only =
      end.process_start_step > 0
          ? fmt::format(" (this process only: it resumed the run at step {})", end.process_start_step)
          : std::string();

  RunSummary summary;
  MetricRecord& record = summary.record;
  record = {{"step", end.last_step},
            {"event", std::string("summary")},
            {"steps", run.steps},
            {"tokens", run.tokens},
            {"training_s", run.step_seconds}};
  std::string& text = summary.text;
  text = fmt::format("done: step {} of {} in {}{}; run directory {}{}\n", end.last_step, end.num_iterations,
                     duration(end.process_seconds), process_only, end.run_dir,
                     end.last_step == end.num_iterations ? ": the run is complete"
                     : end.checkpoints ? " (stopped by --stop-at-step: continue it with --resume)"
                                       : "");
  if (!recorded) text += fmt::format("  {} cannot be read: the run's figures are missing\n", metrics_path);
  if (run.min_val_bpb) {
    text +=
        fmt::format("  min val bpb      {:.6f} at step {}\n", run.min_val_bpb->value, run.min_val_bpb->step);
    record.push_back({"min_val_bpb", run.min_val_bpb->value});
    record.push_back({"min_val_bpb_step", run.min_val_bpb->step});
  } else {
    text += "  min val bpb      not evaluated (train.eval_every)\n";
  }
  if (run.last_core) {
    text += fmt::format("  CORE             {:.4f} at step {}\n", run.last_core->value, run.last_core->step);
    record.push_back({"final_core", run.last_core->value});
    record.push_back({"final_core_step", run.last_core->step});
  } else {
    text += "  CORE             not evaluated (train.core_bundle)\n";
  }
  const double tokens_per_second =
      run.step_seconds > 0 ? static_cast<double>(run.tokens) / run.step_seconds : 0;
  text += fmt::format(
      "  training time    {} over {} steps (their own time in metrics.jsonl: evaluation, samples and "
      "checkpoints not counted)\n  tokens           {} ({} tok/s on average)\n",
      duration(run.step_seconds), run.steps, with_thousands(run.tokens),
      with_thousands(static_cast<int64_t>(tokens_per_second)));
  record.push_back({"avg_tokens_per_s", tokens_per_second});
  if (run.restarts + run.joins > 0) {
    const double lost_seconds = run.reforming_seconds + run.redone_seconds;
    text += fmt::format(
        "  re-formations    {} ({} restart{} after a failure, {} to take machines in); time lost {} ({} "
        "re-forming, {} redoing {} step{})\n",
        run.restarts + run.joins, run.restarts, run.restarts == 1 ? "" : "s", run.joins,
        duration(lost_seconds), duration(run.reforming_seconds), duration(run.redone_seconds),
        run.steps_redone, run.steps_redone == 1 ? "" : "s");
    record.push_back({"reformations", run.restarts + run.joins});
    record.push_back({"restarts", run.restarts});
    record.push_back({"reforming_s", run.reforming_seconds});
    record.push_back({"redone_s", run.redone_seconds});
    record.push_back({"steps_redone", run.steps_redone});
  }
  if (run.mfu_seconds > 0) {
    const double mfu = run.mfu_by_time / run.mfu_seconds;  // time-weighted: the MFU of the average rate
    text += fmt::format("  MFU              {:.2f}% on average\n", mfu);
    record.push_back({"avg_mfu", mfu});
  } else {
    text += fmt::format("  MFU              n/a (no peak FLOP/s known for {})\n", end.device_name);
  }
  text += end.device == Device::kCpu
              ? fmt::format("  peak memory      {} in nanoforge's buffers, {} max RSS{}\n",
                            gigabytes(peak_buffer_bytes), gigabytes(max_rss_bytes), process_only)
              : fmt::format(
                    "  peak memory      {} of {} in nanoforge's buffers (the CUDA runtime's own not "
                    "counted), {} max RSS on the host{}\n",
                    gigabytes(peak_buffer_bytes), end.device_name, gigabytes(max_rss_bytes), process_only);
  record.push_back({"peak_buffer_bytes", peak_buffer_bytes});
  record.push_back({"max_rss_bytes", max_rss_bytes});
  record.push_back({"process_s", end.process_seconds});
  record.push_back({"process_start_step", end.process_start_step});
  text += fmt::format("  checkpoint       {}\n", checkpoint.ok() ? *checkpoint : std::string("none written"));
  record.push_back({"checkpoint", checkpoint.ok() ? *checkpoint : std::string()});
  text += fmt::format("  report           {}\n", report_command);
  record.push_back({"report_command", report_command});
  if (!end.checkpoints) text.resize(text.find('\n') + 1);
  return summary;
}

}  // namespace nanoforge
