// chart_svg: the plot area is kWidth x kHeight user units (the SVG scales to its box), the axes' ranges
// padded by 5%, ticks at 1, 2 or 5 times a power of ten, and the legend in a row under the title. Any finite
// values are drawn: ticks are counted, not stepped to (a step below the values' spacing never advanced).
#include "cli/report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "support/number_format.h"

namespace nanoforge {
namespace {

constexpr double kWidth = 560, kHeight = 300;
constexpr double kLeft = 64, kRight = 16, kTop = 44, kBottom = 40;  // margins: tick labels, title, legend
constexpr int kTargetTicks = 5;
// Values of larger magnitude are left out: the axis' span and padding must stay finite in a double.
constexpr double kLargestDrawn = 1e300;

bool drawable(double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && std::abs(x) <= kLargestDrawn && std::abs(y) <= kLargestDrawn;
}

struct Range {
  double low = std::numeric_limits<double>::infinity(), high = -std::numeric_limits<double>::infinity();
  void add(double value) { low = std::min(low, value), high = std::max(high, value); }
  // Padded by 5% each way; a flat range gets a width of its own so that it draws as a centred line.
  Range padded() const {
    const double span = high - low, pad = span > 0 ? 0.05 * span : std::max(1e-9, 0.1 * std::abs(low));
    return {low - pad, high + pad};
  }
};

// Ticks at multiples of 1, 2 or 5 x 10^k inside `range`, about kTargetTicks of them. Where the values are
// so close that a tick step is below their spacing (1e17 and 1e17 + 16), neighbouring ticks round to one
// value and are drawn once.
std::vector<double> ticks(const Range& range) {
  const double raw = (range.high - range.low) / kTargetTicks;
  if (!(raw > 0) || !std::isfinite(raw)) return {};  // a span so small that a fifth of it is 0
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= raw) break;
  }
  if (!(step > 0) || !std::isfinite(step)) return {};
  const double first = std::ceil(range.low / step), last = std::floor(range.high / step + 1e-9);
  const int count = static_cast<int>(std::clamp(last - first + 1, 0.0, 4.0 * kTargetTicks));
  std::vector<double> values;
  for (int i = 0; i < count; ++i) {
    const double tick = (first + i) * step;
    const double value = std::abs(tick) < 1e-12 * step ? 0.0 : tick;
    if (values.empty() || value != values.back()) values.push_back(value);
  }
  return values;
}

std::string tick_label(double value) {
  if (std::abs(value) >= 1e3 && std::abs(value) < 1e12) return with_thousands(std::llround(value));
  return fmt::format("{:.4g}", value);
}

}  // namespace

bool chart_has_data(const Chart& chart) {
  for (const ChartSeries& series : chart.series) {
    for (const auto& [x, y] : series.points) {
      if (drawable(x, y)) return true;
    }
  }
  return false;
}

std::string series_color(size_t index) {
  static constexpr std::array<const char*, 8> kPalette = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                                          "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
  return kPalette[index % kPalette.size()];
}

std::string html_escape(const std::string& text) {
  std::string escaped;
  for (const char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string chart_svg(const Chart& chart) {
  Range x_range, y_range;
  for (const ChartSeries& series : chart.series) {
    for (const auto& [x, y] : series.points) {
      if (!drawable(x, y)) continue;
      x_range.add(x);
      y_range.add(y);
    }
  }
  const double total_width = kLeft + kWidth + kRight, total_height = kTop + kHeight + kBottom;
  std::string svg = fmt::format(
      "<figure class=\"chart\" data-chart=\"{}\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} "
      "{}\" role=\"img\" aria-label=\"{}\">\n<text class=\"title\" x=\"{}\" y=\"16\">{}</text>\n",
      html_escape(chart.id), total_width, total_height, html_escape(chart.title), kLeft,
      html_escape(chart.title));
  // The legend: one entry per labelled series, in a row under the title.
  double legend_x = kLeft;
  for (const ChartSeries& series : chart.series) {
    if (series.label.empty()) continue;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"30\" x2=\"{1}\" y2=\"30\" stroke=\"{2}\" stroke-width=\"3\"/><text "
        "class=\"legend\" x=\"{3}\" y=\"34\">{4}</text>\n",
        legend_x, legend_x + 16, series.color, legend_x + 20, html_escape(series.label));
    legend_x += 32 + 6.5 * static_cast<double>(series.label.size());
  }
  if (!chart_has_data(chart)) {
    return svg + fmt::format("<text class=\"empty\" x=\"{}\" y=\"{}\">not recorded</text></svg></figure>\n",
                             kLeft + kWidth / 2, kTop + kHeight / 2);
  }
  // One step: a range of +-1 around it, unless the value is too large for that to widen it.
  Range xs = x_range.high > x_range.low ? x_range.padded() : Range{x_range.low - 1, x_range.high + 1};
  if (!(xs.high > xs.low)) xs = x_range.padded();
  const Range ys = y_range.padded();
  auto px = [&](double x) { return kLeft + (x - xs.low) / (xs.high - xs.low) * kWidth; };
  auto py = [&](double y) { return kTop + kHeight - (y - ys.low) / (ys.high - ys.low) * kHeight; };

  svg += fmt::format("<rect class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", kLeft, kTop,
                     kWidth, kHeight);
  for (const double tick : ticks(ys)) {
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/><text class=\"tick\" "
        "x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, py(tick), kLeft + kWidth, kLeft - 6, py(tick) + 4, tick_label(tick));
  }
  for (const double tick : ticks(xs)) {
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/><text class=\"tick\" "
        "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px(tick), kTop, kTop + kHeight, kTop + kHeight + 16, tick_label(tick));
  }
  svg += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     kLeft + kWidth / 2, total_height - 4, html_escape(chart.x_label));
  for (const ChartSeries& series : chart.series) {
    std::string points;
    for (const auto& [x, y] : series.points) {
      if (drawable(x, y)) points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    }
    if (points.empty()) continue;
    points.pop_back();
    svg += fmt::format(
        "<polyline class=\"series\" data-label=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"{}\" stroke-opacity=\"{}\"/>\n",
        html_escape(series.label), points, series.color, series.faint ? 1 : 2, series.faint ? 0.3 : 1);
    if (!series.dots) continue;
    for (const auto& [x, y] : series.points) {
      if (drawable(x, y))
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(x), py(y),
                           series.color);
    }
  }
  return svg + "</svg></figure>\n";
}

}  // namespace nanoforge
