// Line charts as inline SVG for `nanoforge report` (cli/report/run_report.h): plain elements, no script and
// nothing to fetch, so the page opens offline in any browser. Axes span the data with 1-2-5 ticks; a series
// is a polyline, drawn faint (raw values under their smoothing) or with a dot per point (evaluations).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nanoforge {

struct ChartSeries {
  std::string label;  // the legend's text; empty: no legend entry (a faint raw line under its smoothing)
  std::string color;  // CSS colour
  // (step, value); non-finite values, and those beyond 1e300 in magnitude, are left out
  std::vector<std::pair<double, double>> points = {};
  bool faint = false;
  bool dots = false;
};

struct Chart {
  std::string id;  // data-chart attribute, for tests and links
  std::string title;
  std::string x_label = "step";
  std::vector<ChartSeries> series = {};
};

// Whether any series has a point to draw.
bool chart_has_data(const Chart& chart);

// <figure class="chart" data-chart="ID"><svg ...>...</svg></figure>
std::string chart_svg(const Chart& chart);

// The report's palette: one colour per run, in order.
std::string series_color(size_t index);

// Text safe inside HTML and SVG elements and attribute values.
std::string html_escape(const std::string& text);

}  // namespace nanoforge
