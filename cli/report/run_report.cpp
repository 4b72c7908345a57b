// read_run_records and run_report_html: metrics.jsonl read line by line with simdjson (a line that is not a
// record is skipped: a run still training may be mid-line), config.toml flattened to section.key with toml++,
// and the page built from cli/report/svg_chart.h's charts. Every file is opened non-blocking and read only
// when it is a regular file (a pipe or device there would block or never end), within a bound; what of a
// run cannot be read is left out with a note, except metrics.jsonl, without which there is no run.
#include "cli/report/run_report.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>
#include <utility>

#include "cli/report/svg_chart.h"
#include "support/number_format.h"
#include "support/status.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr double kLossSmoothing = 0.9;  // tools/plot_run.py's debiased EMA of the training loss
// The longest metrics.jsonl line read: a sample record holds at most 4096 tokens of at most 1024 bytes
// (docs/untrusted-input.md), 6 bytes each when JSON-escaped: 24 MiB. Longer lines are skipped unread.
constexpr size_t kMaxRecordBytes = 32 << 20;
// config.toml (the resolved recipe, whose own limit is 1 MiB) and core.json (a score per CORE task).
constexpr int64_t kMaxSmallFileBytes = 1 << 20;

// A file opened for reading; closed when it goes.
struct OpenFile {
  int fd = -1;
  int64_t size_bytes = 0;
  OpenFile() = default;
  OpenFile(OpenFile&& other) noexcept : fd(std::exchange(other.fd, -1)), size_bytes(other.size_bytes) {}
  OpenFile& operator=(OpenFile&&) = delete;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

// `path` opened when it is a regular file (a link to one is followed); NotFound when nothing is there.
absl::StatusOr<OpenFile> open_regular_file(const std::string& path) {
  OpenFile file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (file.fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR)
      return absl::NotFoundError(fmt::format("{}: no such file", path));
    return absl::PermissionDeniedError(fmt::format("{}: cannot open: {}", path, std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0)
    return absl::PermissionDeniedError(fmt::format("{}: cannot inspect: {}", path, std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(fmt::format("{} is {}, not a regular file", path,
                                                  S_ISFIFO(info.st_mode)  ? "a pipe"
                                                  : S_ISDIR(info.st_mode) ? "a directory"
                                                                          : "a device"));
  }
  file.size_bytes = info.st_size;
  return file;
}

// Reads up to `max_bytes` of `file` from where it is (less when the file ends first).
absl::StatusOr<std::string> read_up_to(const OpenFile& file, const std::string& path, size_t max_bytes) {
  std::string bytes;
  char chunk[1 << 16];
  while (bytes.size() < max_bytes) {
    const ssize_t got = ::read(file.fd, chunk, std::min(sizeof(chunk), max_bytes - bytes.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return absl::DataLossError(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    if (got == 0) break;
    bytes.append(chunk, static_cast<size_t>(got));
  }
  return bytes;
}

// A short text file whole (config.toml, core.json).
absl::StatusOr<std::string> read_small_file(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(const OpenFile file, open_regular_file(path));
  if (file.size_bytes > kMaxSmallFileBytes) {
    return absl::InvalidArgumentError(fmt::format("{}: {} bytes, more than the {} this file is read up to",
                                                  path, file.size_bytes, kMaxSmallFileBytes));
  }
  return read_up_to(file, path, static_cast<size_t>(file.size_bytes));
}

// Calls `on_line` with each line of the file's first `size_bytes` (what it held when opened: a run may be
// appending); lines longer than kMaxRecordBytes are skipped without being held.
absl::Status for_each_line(const OpenFile& file, const std::string& path,
                           const std::function<void(const std::string&)>& on_line) {
  std::string line;
  bool overlong = false;
  for (int64_t left = file.size_bytes; left > 0;) {
    NANOFORGE_ASSIGN_OR_RETURN(const std::string chunk,
                               read_up_to(file, path, static_cast<size_t>(std::min<int64_t>(left, 1 << 20))));
    if (chunk.empty()) break;  // the file was shortened meanwhile
    left -= static_cast<int64_t>(chunk.size());
    for (std::string_view rest = chunk; !rest.empty();) {
      const size_t newline = rest.find('\n');
      const std::string_view piece = rest.substr(0, newline);
      overlong = overlong || line.size() + piece.size() > kMaxRecordBytes;
      if (overlong) {
        line.clear();
      } else {
        line.append(piece);
      }
      if (newline == std::string_view::npos) break;
      if (!overlong) on_line(line);
      line.clear();
      overlong = false;
      rest.remove_prefix(newline + 1);
    }
  }
  if (!overlong && !line.empty()) on_line(line);
  return absl::OkStatus();
}

std::optional<double> number_field(simdjson::dom::object& record, const char* key) {
  double value = 0;
  if (record[key].get_double().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

void read_metrics_record(simdjson::dom::parser& parser, const std::string& line, RunRecords& run) {
  simdjson::dom::object record;
  int64_t step = 0;
  if (parser.parse(line).get_object().get(record) != simdjson::SUCCESS ||
      record["step"].get_int64().get(step) != simdjson::SUCCESS) {
    return;
  }
  const double x = static_cast<double>(step);
  std::string_view text;
  if (const auto loss = number_field(record, "loss")) {
    run.training.push_back({step, *loss, number_field(record, "lr_multiplier").value_or(NAN),
                            number_field(record, "grad_norm").value_or(NAN),
                            number_field(record, "tokens_per_s").value_or(NAN), number_field(record, "mfu"),
                            number_field(record, "step_ms"), number_field(record, "exposed_comm_ms"),
                            number_field(record, "data_wait_ms")});
  } else if (const auto bpb = number_field(record, "val_bpb")) {
    run.val_bpb.emplace_back(x, *bpb);
  } else if (const auto core = number_field(record, "core_metric")) {
    run.core.emplace_back(x, *core);
    run.core_tasks.clear();
    for (auto [key, value] : record) {
      double centred = 0;
      if (key.substr(0, 5) == "core/" && value.get_double().get(centred) == simdjson::SUCCESS)
        run.core_tasks[std::string(key.substr(5))] = centred;
    }
  } else if (const auto checkpoint = number_field(record, "checkpoint_ms")) {
    run.checkpoint_ms.emplace_back(x, *checkpoint);
  } else if (record["sample"].get_string().get(text) == simdjson::SUCCESS) {
    run.samples.emplace_back(step, std::string(text));
  }
}

// core.json from `nanoforge eval --core --out RUN/core.json` (make demo), when training logged no CORE.
void read_core_file(const std::string& path, RunRecords& run) {
  const absl::StatusOr<std::string> text = read_small_file(path);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) run.notes.push_back(std::string(text.status().message()));
    return;
  }
  run.files.push_back(path);
  simdjson::dom::parser parser;
  simdjson::dom::object core;
  if (const auto error = parser.parse(*text).get_object().get(core); error != simdjson::SUCCESS) {
    run.notes.push_back(fmt::format("{}: not a JSON object: {}", path, simdjson::error_message(error)));
    return;
  }
  double metric = 0;
  int64_t step = 0;
  if (core["core_metric"].get_double().get(metric) != simdjson::SUCCESS ||
      core["step"].get_int64().get(step) != simdjson::SUCCESS) {
    return;
  }
  run.core.emplace_back(static_cast<double>(step), metric);
  simdjson::dom::object tasks;
  if (core["centered_results"].get_object().get(tasks) != simdjson::SUCCESS) return;
  for (auto [key, value] : tasks) {
    double centred = 0;
    if (value.get_double().get(centred) == simdjson::SUCCESS) run.core_tasks[std::string(key)] = centred;
  }
}

// A float as config.toml has it: the shortest text that reads back as the same double (as Python's repr and
// TOML writers print it), so 0.3 shows as 0.3, not as toml++'s 17 digits 0.29999999999999999.
std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", value);                      // fmt's shortest round trip
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // a float stays one: 1.0, not 1
  return text;
}

// A config value as TOML text, its floats (alone or in arrays) by float_text.
std::string config_value_text(const toml::node& value) {
  if (const toml::value<double>* number = value.as_floating_point()) return float_text(number->get());
  if (const toml::array* array = value.as_array()) {
    std::vector<std::string> items;
    for (const toml::node& item : *array)
      items.push_back(config_value_text(item));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  std::ostringstream text;
  value.visit([&](const auto& leaf) { text << leaf; });
  return text.str();
}

void read_config(const std::string& path, RunRecords& run) {
  const absl::StatusOr<std::string> text = read_small_file(path);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) run.notes.push_back(std::string(text.status().message()));
    return;
  }
  run.files.push_back(path);
  toml::table table;
  try {
    table = toml::parse(*text, path);
  } catch (const toml::parse_error& error) {
    run.notes.push_back(fmt::format("{}:{}:{}: not TOML: {}", path, error.source().begin.line,
                                    error.source().begin.column, error.description()));
    return;
  }
  for (const auto& [section, node] : table) {
    const toml::table* keys = node.as_table();
    if (keys == nullptr) continue;
    for (const auto& [key, value] : *keys)
      run.config.emplace_back(fmt::format("{}.{}", section.str(), key.str()), config_value_text(value));
  }
}

// A checkpoint's step from its directory's name, `step_` and digits only (not `step_000010.replaced-PID`).
std::optional<int64_t> checkpoint_step(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return std::nullopt;
  int64_t step = 0;
  const char* end = name.data() + name.size();
  const auto [stop, error] = std::from_chars(name.data() + 5, end, step);
  if (error != std::errc() || stop != end || step < 0) return std::nullopt;
  return step;
}

// The listing below goes through std::filesystem's error-code overloads only: the others throw (a looping
// link, a place that cannot be read), which ended the program.
void read_checkpoints(const std::string& run_dir, RunRecords& run) {
  const std::string root = run_dir + "/checkpoints";
  std::error_code error;
  fs::directory_iterator entry(root, error);
  if (error) {
    if (error != std::errc::no_such_file_or_directory && error != std::errc::not_a_directory)
      run.notes.push_back(fmt::format("{}: cannot list it: {}", root, error.message()));
    return;
  }
  for (; entry != fs::directory_iterator(); entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    const std::optional<int64_t> step = checkpoint_step(name);
    if (!step) continue;
    const fs::file_status status = entry->status(error);  // a link to a checkpoint is followed
    if (error) {
      run.notes.push_back(fmt::format("{}: {}", entry->path().string(), error.message()));
      error.clear();
      continue;
    }
    if (!fs::is_directory(status)) continue;
    RunRecords::Checkpoint checkpoint{name, *step, 0};
    fs::directory_iterator file(entry->path(), error);
    for (; file != fs::directory_iterator(); file.increment(error)) {
      std::error_code file_error;
      const fs::file_status file_status = file->status(file_error);
      const uintmax_t bytes =
          !file_error && fs::is_regular_file(file_status) ? file->file_size(file_error) : 0;
      if (file_error) {
        run.notes.push_back(
            fmt::format("{}, from its checkpoint's size: {}", file->path().string(), file_error.message()));
        continue;
      }
      checkpoint.bytes += static_cast<int64_t>(bytes);
      run.files.push_back(file->path().string());
    }
    if (error) {
      run.notes.push_back(fmt::format("{}: {}", entry->path().string(), error.message()));
      error.clear();
      continue;
    }
    run.checkpoints.push_back(checkpoint);
  }
  if (error)
    run.notes.push_back(fmt::format("{}: what its listing did not reach: {}", root, error.message()));
  std::sort(run.checkpoints.begin(), run.checkpoints.end(),
            [](const auto& a, const auto& b) { return a.step < b.step; });
}

std::vector<std::pair<double, double>> debiased_ema(const std::vector<std::pair<double, double>>& points) {
  std::vector<std::pair<double, double>> smoothed;
  double average = 0, weight = 1;
  for (const auto& [x, y] : points) {
    average = kLossSmoothing * average + (1 - kLossSmoothing) * y;
    weight *= kLossSmoothing;
    smoothed.emplace_back(x, average / (1 - weight));
  }
  return smoothed;
}

// One chart with a series per run of `value` over the training records (left out where it is absent).
template <class Value>
Chart training_chart(const std::vector<RunRecords>& runs, std::string id, std::string title, Value value) {
  Chart chart{.id = std::move(id), .title = std::move(title)};
  for (size_t i = 0; i < runs.size(); ++i) {
    ChartSeries series{.label = runs[i].name, .color = series_color(i)};
    for (const TrainingPoint& point : runs[i].training) {
      if (const std::optional<double> y = value(point)) series.points.emplace_back(point.step, *y);
    }
    chart.series.push_back(std::move(series));
  }
  return chart;
}

// The steps the runs trained, first to last; nullopt when none recorded a training step.
std::optional<AxisExtent> trained_steps(const std::vector<RunRecords>& runs) {
  std::optional<AxisExtent> steps;
  for (const RunRecords& run : runs) {
    for (const TrainingPoint& point : run.training) {
      const double step = static_cast<double>(point.step);
      if (!steps) steps = AxisExtent{step, step};
      steps->low = std::min(steps->low, step), steps->high = std::max(steps->high, step);
    }
  }
  return steps;
}

// Evaluations over the runs' steps: one CORE point at step 250 sits at the end of its run's axis.
Chart evaluation_chart(const std::vector<RunRecords>& runs, std::string id, std::string title,
                       std::vector<std::pair<double, double>> RunRecords::*points) {
  Chart chart{.id = std::move(id), .title = std::move(title), .x_extent = trained_steps(runs)};
  for (size_t i = 0; i < runs.size(); ++i)
    chart.series.push_back({runs[i].name, series_color(i), runs[i].*points, SeriesStyle::kLineAndDots});
  return chart;
}

Chart loss_chart(const std::vector<RunRecords>& runs) {
  Chart chart{.id = "loss", .title = "training loss (nats/token): raw, and smoothed (EMA 0.9)"};
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::pair<double, double>> raw;
    for (const TrainingPoint& point : runs[i].training)
      raw.emplace_back(point.step, point.loss);
    chart.series.push_back({"", series_color(i), raw, SeriesStyle::kFaintLine});
    chart.series.push_back({runs[i].name, series_color(i), debiased_ema(raw)});
  }
  return chart;
}

// Where one run's steps went, stacked to the step's time: compute (the rest of the step), exposed
// communication, data wait; checkpoints (their own time, not part of a step) as markers.
Chart time_split_chart(const RunRecords& run) {
  Chart chart{.id = "time-" + run.name, .title = "time per step (ms): " + run.name};
  ChartSeries compute{"compute", series_color(0), {}, SeriesStyle::kStacked},
      communication{"exposed communication", series_color(1), {}, SeriesStyle::kStacked},
      data{"data wait", series_color(2), {}, SeriesStyle::kStacked},
      checkpoint{"checkpoint", series_color(3), run.checkpoint_ms, SeriesStyle::kMarkers};
  for (const TrainingPoint& point : run.training) {
    if (!point.step_ms) continue;
    const double comm = point.exposed_comm_ms.value_or(0), wait = point.data_wait_ms.value_or(0);
    compute.points.emplace_back(point.step, std::max(0.0, *point.step_ms - comm - wait));
    communication.points.emplace_back(point.step, comm);
    data.points.emplace_back(point.step, wait);
  }
  chart.series = {compute, communication, data, checkpoint};
  return chart;
}

// One time chart per run, side by side on one y-scale: the widest of their ranges.
std::vector<Chart> time_split_charts(const std::vector<RunRecords>& runs) {
  std::vector<Chart> charts;
  std::optional<AxisExtent> shared;
  for (const RunRecords& run : runs) {
    Chart chart = time_split_chart(run);
    if (const std::optional<AxisExtent> range = chart_y_range(chart)) {
      if (!shared) shared = range;
      shared->low = std::min(shared->low, range->low), shared->high = std::max(shared->high, range->high);
      charts.push_back(std::move(chart));
    }
  }
  for (Chart& chart : charts)
    chart.y_extent = shared;
  return charts;
}

std::string config_table(const std::vector<RunRecords>& runs) {
  std::vector<std::string> keys;  // in the first run's order, then keys only later runs have
  std::set<std::string> seen;
  std::vector<std::map<std::string, std::string>> values(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& [key, value] : runs[i].config) {
      values[i][key] = value;
      if (seen.insert(key).second) keys.push_back(key);
    }
  }
  std::string html = "<table class=\"config\"><thead><tr><th>key</th>";
  for (const RunRecords& run : runs)
    html += "<th>" + html_escape(run.name) + "</th>";
  html += "</tr></thead><tbody>\n";
  int differing = 0;
  for (const std::string& key : keys) {
    std::set<std::string> distinct;
    for (const auto& run_values : values)
      distinct.insert(run_values.count(key) ? run_values.at(key) : "(absent)");
    const bool differs = distinct.size() > 1;
    differing += differs;
    html += fmt::format("<tr{}><td>{}</td>", differs ? " class=\"differs\"" : "", html_escape(key));
    for (const auto& run_values : values)
      html += "<td>" + html_escape(run_values.count(key) ? run_values.at(key) : "(absent)") + "</td>";
    html += "</tr>\n";
  }
  html += "</tbody></table>\n";
  const std::string summary =
      runs.size() < 2 ? ""
                      : fmt::format("<p class=\"note\">{} key{} differ between the runs (highlighted).</p>\n",
                                    differing, differing == 1 ? "" : "s");
  return summary + html;
}

std::string checkpoints_table(const RunRecords& run) {
  if (run.checkpoints.empty()) return "<p class=\"note\">no checkpoints</p>\n";
  std::string html =
      "<table class=\"checkpoints\"><thead><tr><th>checkpoint</th><th>step</th><th>size</th></tr>"
      "</thead><tbody>\n";
  for (const RunRecords::Checkpoint& checkpoint : run.checkpoints) {
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.1f} MB</td></tr>\n", html_escape(checkpoint.name),
                        checkpoint.step, static_cast<double>(checkpoint.bytes) / 1e6);
  }
  return html + "</tbody></table>\n";
}

std::string core_tasks_table(const RunRecords& run) {
  if (run.core_tasks.empty()) return "";
  std::string html =
      "<table class=\"core\"><thead><tr><th>CORE task</th><th>centred accuracy</th></tr></thead>"
      "<tbody>\n";
  for (const auto& [task, centred] : run.core_tasks)
    html += fmt::format("<tr><td>{}</td><td>{:.4f}</td></tr>\n", html_escape(task), centred);
  return html + "</tbody></table>\n";
}

std::string samples_list(const RunRecords& run) {
  if (run.samples.empty()) return "<p class=\"note\">no samples (train.sample_every)</p>\n";
  std::string html = "<ul class=\"samples\">\n";
  for (const auto& [step, text] : run.samples)
    html += fmt::format("<li><span class=\"step\">step {}</span> {}</li>\n", step, html_escape(text));
  return html + "</ul>\n";
}

// What of the run directory could not be read and is left out of the page.
std::string notes_list(const RunRecords& run) {
  if (run.notes.empty()) return "";
  std::string html = "<ul class=\"left-out\">\n";
  for (const std::string& note : run.notes)
    html += "<li>left out: " + html_escape(note) + "</li>\n";
  return html + "</ul>\n";
}

// A loss or bits per byte in the summary: 4 decimals, or 4 digits where that would be long (a diverged run).
std::string summary_number(double value) {
  return std::abs(value) < 1e6 ? fmt::format("{:.4f}", value) : fmt::format("{:.4g}", value);
}

// Tokens per second with thousands separators, when it fits an integer.
std::string rate_text(double tokens_per_s) {
  if (std::abs(tokens_per_s) < 1e15) return with_thousands(static_cast<int64_t>(tokens_per_s));
  return fmt::format("{:.4g}", tokens_per_s);
}

constexpr const char* kStyle =
    R"(body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1800px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:16px}
figure.chart{margin:0;border:1px solid #eee;padding:4px}svg{width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#333}svg .title{font-weight:600;font-size:13px}
svg .plot{fill:none;stroke:#999}svg .grid{stroke:#eee}svg .empty{fill:#999;text-anchor:middle}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
tr.differs td{background:#fff3b0;font-weight:600}.note{color:#666}.step{color:#888;margin-right:8px}
.runs{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:24px}
.left-out{color:#a33})";

}  // namespace

absl::StatusOr<RunRecords> read_run_records(const std::string& run_dir) {
  const std::string metrics = run_dir + "/metrics.jsonl";
  absl::StatusOr<OpenFile> metrics_file = open_regular_file(metrics);
  if (!metrics_file.ok()) {
    return absl::Status(metrics_file.status().code(),
                        fmt::format("{}: no metrics.jsonl to report on ({}); give run directories (nanoforge "
                                    "train --run-dir)",
                                    run_dir, std::string(metrics_file.status().message())));
  }
  RunRecords run;
  run.dir = run_dir;
  run.name = fs::path(run_dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::path(run_dir).lexically_normal().parent_path().filename().string();
  run.files.push_back(metrics);
  simdjson::dom::parser parser;
  NANOFORGE_RETURN_IF_ERROR(for_each_line(
      *metrics_file, metrics, [&](const std::string& line) { read_metrics_record(parser, line, run); }));
  if (run.core.empty()) read_core_file(run_dir + "/core.json", run);
  read_config(run_dir + "/config.toml", run);
  read_checkpoints(run_dir, run);
  return run;
}

std::string run_report_html(const std::vector<RunRecords>& runs) {
  std::vector<std::string> names;
  for (const RunRecords& run : runs)
    names.push_back(run.name);
  const std::string title = html_escape(fmt::format("nanoforge: {}", fmt::join(names, ", ")));
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style>"
      "</head><body>\n<h1>{}</h1>\n",
      title, kStyle, title);
  html +=
      "<table class=\"runs-summary\"><thead><tr><th>run</th><th>directory</th><th>steps</th><th>last loss"
      "</th><th>last val bpb</th><th>median tok/s</th></tr></thead><tbody>\n";
  for (const RunRecords& run : runs) {
    std::vector<double> rates;  // finite only: NaN (not recorded) breaks the sort's ordering
    for (const TrainingPoint& point : run.training) {
      if (std::isfinite(point.tokens_per_s)) rates.push_back(point.tokens_per_s);
    }
    std::sort(rates.begin(), rates.end());
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        html_escape(run.name), html_escape(run.dir),
                        run.training.empty() ? 0 : run.training.back().step,
                        run.training.empty() ? "-" : summary_number(run.training.back().loss),
                        run.val_bpb.empty() ? "-" : summary_number(run.val_bpb.back().second),
                        rates.empty() ? "-" : rate_text(rates[rates.size() / 2]));
  }
  html += "</tbody></table>\n<h2>Curves</h2>\n<div class=\"charts\">\n";
  std::vector<Chart> charts = {
      loss_chart(runs),
      evaluation_chart(runs, "val-bpb", "validation bits per byte", &RunRecords::val_bpb),
      evaluation_chart(runs, "core", "CORE (mean centred accuracy)", &RunRecords::core),
      training_chart(runs, "lr", "learning-rate multiplier",
                     [](const TrainingPoint& p) { return p.lr_multiplier; }),
      training_chart(runs, "gnorm", "gradient norm", [](const TrainingPoint& p) { return p.grad_norm; }),
      training_chart(runs, "tokens-per-s", "throughput (tokens/s)",
                     [](const TrainingPoint& p) { return p.tokens_per_s; }),
      training_chart(runs, "mfu", "MFU (%)", [](const TrainingPoint& p) { return p.mfu; })};
  std::vector<std::string> not_recorded;
  for (const Chart& chart : charts) {
    if (chart_has_data(chart)) {
      html += chart_svg(chart);
    } else {
      not_recorded.push_back(chart.title);
    }
  }
  html += "</div>\n";
  if (!not_recorded.empty()) {
    html +=
        fmt::format("<p class=\"note\">Not recorded by {}: {} (MFU needs a device with a known peak).</p>\n",
                    runs.size() > 1 ? "these runs" : "this run",
                    html_escape(fmt::format("{}", fmt::join(not_recorded, "; "))));
  }
  html += "<h2>Time per step</h2>\n<div class=\"charts\">\n";
  for (const Chart& chart : time_split_charts(runs))
    html += chart_svg(chart);
  html += "</div>\n<h2>Config</h2>\n" + config_table(runs);
  html += "<h2>Checkpoints, CORE tasks and samples</h2>\n<div class=\"runs\">\n";
  for (const RunRecords& run : runs) {
    html += fmt::format("<section class=\"run\"><h3>{}</h3>\n", html_escape(run.name));
    html +=
        notes_list(run) + checkpoints_table(run) + core_tasks_table(run) + samples_list(run) + "</section>\n";
  }
  return html + "</div>\n</body></html>\n";
}

}  // namespace nanoforge
