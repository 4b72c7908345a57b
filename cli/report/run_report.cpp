// read_run_records and run_report_html: metrics.jsonl read line by line with simdjson (a line that is not a
// record is skipped: a run still training may be mid-line), config.toml flattened to section.key with toml++,
// and the page built from cli/report/svg_chart.h's charts.
#include "cli/report/run_report.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/report/svg_chart.h"
#include "support/number_format.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr double kLossSmoothing = 0.9;  // tools/plot_run.py's debiased EMA of the training loss

std::optional<double> number_field(simdjson::dom::object& record, const char* key) {
  double value = 0;
  if (record[key].get_double().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

void read_metrics(const std::string& path, RunRecords& run) {
  std::ifstream file(path);
  simdjson::dom::parser parser;
  for (std::string line; std::getline(file, line);) {
    simdjson::dom::object record;
    int64_t step = 0;
    if (parser.parse(line).get_object().get(record) != simdjson::SUCCESS ||
        record["step"].get_int64().get(step) != simdjson::SUCCESS) {
      continue;
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
}

// core.json from `nanoforge eval --core --out RUN/core.json` (make demo), when training logged no CORE.
void read_core_file(const std::string& path, RunRecords& run) {
  simdjson::dom::parser parser;
  simdjson::dom::object core;
  double metric = 0;
  if (parser.load(path).get_object().get(core) != simdjson::SUCCESS ||
      core["core_metric"].get_double().get(metric) != simdjson::SUCCESS) {
    return;
  }
  int64_t step = 0;
  if (core["step"].get_int64().get(step) != simdjson::SUCCESS) return;
  run.core.emplace_back(static_cast<double>(step), metric);
  simdjson::dom::object tasks;
  if (core["centered_results"].get_object().get(tasks) != simdjson::SUCCESS) return;
  for (auto [key, value] : tasks) {
    double centred = 0;
    if (value.get_double().get(centred) == simdjson::SUCCESS) run.core_tasks[std::string(key)] = centred;
  }
}

void read_config(const std::string& path, RunRecords& run) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error&) {
    return;  // shown as no config
  }
  for (const auto& [section, node] : table) {
    const toml::table* keys = node.as_table();
    if (keys == nullptr) continue;
    for (const auto& [key, value] : *keys) {
      std::ostringstream text;
      value.visit([&](const auto& leaf) { text << leaf; });
      run.config.emplace_back(fmt::format("{}.{}", section.str(), key.str()), text.str());
    }
  }
}

void read_checkpoints(const std::string& run_dir, RunRecords& run) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir + "/checkpoints", error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("step_", 0) != 0) continue;
    RunRecords::Checkpoint checkpoint{name, std::atoll(name.c_str() + 5), 0};
    for (const fs::directory_entry& file : fs::recursive_directory_iterator(entry.path(), error)) {
      if (file.is_regular_file()) checkpoint.bytes += static_cast<int64_t>(file.file_size(error));
    }
    run.checkpoints.push_back(checkpoint);
  }
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

Chart evaluation_chart(const std::vector<RunRecords>& runs, std::string id, std::string title,
                       std::vector<std::pair<double, double>> RunRecords::*points) {
  Chart chart{.id = std::move(id), .title = std::move(title)};
  for (size_t i = 0; i < runs.size(); ++i)
    chart.series.push_back({runs[i].name, series_color(i), runs[i].*points, false, true});
  return chart;
}

Chart loss_chart(const std::vector<RunRecords>& runs) {
  Chart chart{.id = "loss", .title = "training loss (nats/token): raw, and smoothed (EMA 0.9)"};
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::pair<double, double>> raw;
    for (const TrainingPoint& point : runs[i].training)
      raw.emplace_back(point.step, point.loss);
    chart.series.push_back({"", series_color(i), raw, /*faint=*/true});
    chart.series.push_back({runs[i].name, series_color(i), debiased_ema(raw)});
  }
  return chart;
}

// Where one run's steps went: compute (the rest of the step), exposed communication, data wait, checkpoints.
Chart time_split_chart(const RunRecords& run) {
  Chart chart{.id = "time-" + run.name, .title = "time per step (ms): " + run.name};
  ChartSeries compute{.label = "compute", .color = series_color(0)},
      communication{.label = "exposed communication", .color = series_color(1)},
      data{.label = "data wait", .color = series_color(2)},
      checkpoint{"checkpoint", series_color(3), run.checkpoint_ms, false, true};
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

constexpr const char* kStyle =
    R"(body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1800px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:16px}
figure.chart{margin:0;border:1px solid #eee;padding:4px}svg{width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#333}svg .title{font-weight:600;font-size:13px}
svg .plot{fill:none;stroke:#999}svg .grid{stroke:#eee}svg .empty{fill:#999;text-anchor:middle}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
tr.differs td{background:#fff3b0;font-weight:600}.note{color:#666}.step{color:#888;margin-right:8px}
.runs{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:24px})";

}  // namespace

absl::StatusOr<RunRecords> read_run_records(const std::string& run_dir) {
  const std::string metrics = run_dir + "/metrics.jsonl";
  if (!fs::is_regular_file(metrics)) {
    return absl::NotFoundError(
        fmt::format("{}: no metrics.jsonl; give run directories (nanoforge train --run-dir)", run_dir));
  }
  RunRecords run;
  run.dir = run_dir;
  run.name = fs::path(run_dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::path(run_dir).lexically_normal().parent_path().filename().string();
  read_metrics(metrics, run);
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
    std::vector<double> rates;
    for (const TrainingPoint& point : run.training)
      rates.push_back(point.tokens_per_s);
    std::sort(rates.begin(), rates.end());
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        html_escape(run.name), html_escape(run.dir),
                        run.training.empty() ? 0 : run.training.back().step,
                        run.training.empty() ? "-" : fmt::format("{:.4f}", run.training.back().loss),
                        run.val_bpb.empty() ? "-" : fmt::format("{:.4f}", run.val_bpb.back().second),
                        rates.empty() ? "-" : with_thousands(static_cast<int64_t>(rates[rates.size() / 2])));
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
  for (const RunRecords& run : runs) {
    const Chart chart = time_split_chart(run);
    if (chart_has_data(chart)) html += chart_svg(chart);
  }
  html += "</div>\n<h2>Config</h2>\n" + config_table(runs);
  html += "<h2>Checkpoints, CORE tasks and samples</h2>\n<div class=\"runs\">\n";
  for (const RunRecords& run : runs) {
    html += fmt::format("<section class=\"run\"><h3>{}</h3>\n", html_escape(run.name));
    html += checkpoints_table(run) + core_tasks_table(run) + samples_list(run) + "</section>\n";
  }
  return html + "</div>\n</body></html>\n";
}

}  // namespace nanoforge
