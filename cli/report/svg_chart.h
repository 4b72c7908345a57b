// Charts as inline SVG for `nanoforge report` (cli/report/run_report.h): plain elements, no script and
// nothing to fetch, so the page opens offline in any browser. x is a training step; axes span the data (and
// any extent the caller gives: the run's steps, a y-range shared by charts shown side by side) with 1-2-5
// ticks. A series is a line, a faint line, a line with dots, separate markers, or an area stacked on the
// areas before it; events are dashed vertical lines, labelled.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nanoforge {

enum class SeriesStyle {
  kLine,
  kFaintLine,    // raw values under their smoothing; drawn thin and pale
  kLineAndDots,  // evaluations: a line through them and a dot on each
  kMarkers,      // events (checkpoints): a separate marker each, no line between them
  kStacked,      // a part of a whole: filled from the kStacked series before it (at the same step) upwards
};

struct ChartSeries {
  std::string label;  // the legend's text; empty: no legend entry (a faint raw line under its smoothing)
  std::string color;  // CSS colour
  // (step, value); non-finite values, and those beyond 1e300 in magnitude, are left out
  std::vector<std::pair<double, double>> points = {};
  SeriesStyle style = SeriesStyle::kLine;
};

// Something that happened at a step (a re-formation of the job): a dashed vertical line across the plot with
// a short label at its top.
struct ChartEvent {
  double step = 0;
  std::string label;  // "restart 1: 3 -> 2"
  std::string color;  // CSS colour
};

struct AxisExtent {
  double low = 0, high = 0;
};

struct Chart {
  std::string id;  // data-chart attribute, for tests and links
  std::string title;
  std::string x_label = "step";
  std::vector<ChartSeries> series = {};
  std::vector<ChartEvent> events = {};  // drawn over the series' steps; a chart without data draws none
  // What each axis covers besides the data: the runs' steps (a lone evaluation sits in its run, not in a
  // range of +-1 around it) and a y-range shared by the charts compared side by side.
  std::optional<AxisExtent> x_extent = std::nullopt, y_extent = std::nullopt;
};

// Whether any series has a point to draw.
bool chart_has_data(const Chart& chart);

// The y-range of what the chart draws (stacked series summed); nullopt when it has no data.
std::optional<AxisExtent> chart_y_range(const Chart& chart);

// <figure class="chart" data-chart="ID"><svg ...>...</svg></figure>
std::string chart_svg(const Chart& chart);

// The report's palette: one colour per run, in order.
std::string series_color(size_t index);

// Text safe inside HTML and SVG elements and attribute values.
std::string html_escape(const std::string& text);

}  // namespace nanoforge
