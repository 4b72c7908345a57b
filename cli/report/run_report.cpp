// run_report_html: the page built from the runs' records (cli/report/run_records.h) and
// cli/report/svg_chart.h's charts — curves overlaid per run (the loss marked where `nanoforge launch`
// re-formed the job), the re-formations, the time split, configs side by side, and each run's checkpoints,
// CORE tasks, samples and what was left out.
#include "cli/report/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "cli/report/svg_chart.h"
#include "support/number_format.h"

namespace nanoforge {
namespace {

constexpr double kLossSmoothing = 0.9;  // tools/plot_run.py's debiased EMA of the training loss

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

// A re-formation's short label: "restart 1: 3 -> 2" after a failure, "join: 2 -> 3" to take a machine in.
std::string reformation_label(const Reformation& reformation) {
  const std::string what =
      reformation.cause == "join" ? std::string("join") : fmt::format("restart {}", reformation.restart);
  return fmt::format("{}: {} -> {}", what, reformation.previous_world_size, reformation.world_size);
}

// The loss, with each run's re-formations marked at the step it resumed from.
Chart loss_chart(const std::vector<RunRecords>& runs) {
  Chart chart{.id = "loss", .title = "training loss (nats/token): raw, and smoothed (EMA 0.9)"};
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::pair<double, double>> raw;
    for (const TrainingPoint& point : runs[i].training)
      raw.emplace_back(point.step, point.loss);
    chart.series.push_back({"", series_color(i), raw, SeriesStyle::kFaintLine});
    chart.series.push_back({runs[i].name, series_color(i), debiased_ema(raw)});
    for (const Reformation& reformation : runs[i].reformations) {
      chart.events.push_back(
          {static_cast<double>(reformation.step), reformation_label(reformation), series_color(i)});
    }
  }
  return chart;
}

// The runs' re-formations by `nanoforge launch`, one row each; empty when no run has any.
std::string reformations_table(const std::vector<RunRecords>& runs) {
  std::string rows;
  auto seconds = [](std::optional<double> value) {
    return value ? fmt::format("{:.1f}", *value) : std::string("-");
  };
  auto nodes = [](const std::string& list) { return list.empty() ? std::string("-") : html_escape(list); };
  for (const RunRecords& run : runs) {
    for (const Reformation& reformation : run.reformations) {
      rows += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} -&gt; {}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td></tr>\n",
          html_escape(run.name), reformation.step,
          reformation.cause == "join" ? std::string("join")
                                      : fmt::format("failure (restart {})", reformation.restart),
          reformation.previous_world_size, reformation.world_size, nodes(reformation.nodes_left),
          nodes(reformation.nodes_joined), seconds(reformation.seconds_to_resume),
          reformation.steps_redone
              ? fmt::format("{} ({} s)", *reformation.steps_redone, seconds(reformation.seconds_redone))
              : std::string("-"));
    }
  }
  if (rows.empty()) return "";
  return "<h2>Re-formations</h2>\n<p class=\"note\">Each time <code>nanoforge launch</code> re-formed the "
         "job "
         "(after a failure, or to take in a machine that came back), at the step it resumed from; marked on "
         "the loss curve.</p>\n<table class=\"reformations\"><thead><tr><th>run</th><th>step</th><th>cause"
         "</th><th>world size</th><th>nodes left</th><th>nodes joined</th><th>seconds from failure (or stop) "
         "to "
         "resume</th><th>steps redone (their time)</th></tr></thead><tbody>\n" +
         rows + "</tbody></table>\n";
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
  html += reformations_table(runs);
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
