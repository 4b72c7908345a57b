// chart_svg: the plot area is kWidth x kHeight user units (the SVG scales to its box), each axis spanning
// its data and the chart's extents, padded by 5% (not below 0 for data that is not); ticks at 1, 2 or 5
// times a power of ten, at least kMinTicks of them, labelled with the decimals their step needs (so no two
// read alike); the legend in rows under the title, laid out by the width of its text. Any finite values
// are drawn: ticks are counted, not stepped to (a step below the values' spacing never advanced).
#include "cli/report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string_view>

#include "support/number_format.h"

namespace nanoforge {
namespace {

constexpr double kWidth = 560, kHeight = 300;
constexpr double kLeft = 64, kRight = 16, kBottom = 40;              // margins: tick labels, the x-axis label
constexpr double kTitleHeight = 22;                                  // the title's line, above the legend
constexpr double kLegendRowHeight = 16;                              // one row of legend entries (12 px text)
constexpr double kLegendFontPx = 12;                                 // the page's style for svg text
constexpr double kSwatchWidth = 16, kSwatchGap = 4, kEntryGap = 16;  // swatch, swatch to text, to next entry
constexpr int kTargetTicks = 5, kMinTicks = 4;
constexpr size_t kEventLabelRows = 3;  // event labels go down in turn: three close events stay readable
// Values of larger magnitude are left out: the axis' span and padding must stay finite in a double.
constexpr double kLargestDrawn = 1e300;

// The advance widths of the printable ASCII characters, in thousandths of the font size: for each, the wider
// of Arial's (= Helvetica's, Liberation Sans') and DejaVu Sans' (= Bitstream Vera's; Verdana's are within
// 2%), the narrowest and the widest of the fonts that the page's system-ui and sans-serif resolve to. A
// legend laid out by them does not run into the next entry in any of these fonts.
constexpr std::array<int, 95> kCharacterWidths = {
    318,  401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,  // space to /
    636,  636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 556,  // 0 to ?
    1015, 684, 686, 722, 770, 667, 611, 778, 752, 295, 500, 667, 557, 863, 748, 787,  // @ to O
    667,  787, 722, 667, 611, 732, 684, 989, 685, 667, 685, 390, 337, 390, 838, 556,  // P to _
    500,  613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,  // ` to o
    635,  635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838};      // p to ~
// Any other character counts as a full em: as wide as a CJK ideograph, wider than any accented letter.
constexpr int kOtherWidth = 1000;

// The width in pixels of `text` at `font_px`, at most: the sum of its characters' advance widths
// (no kerning, which only narrows it).
double text_width_px(std::string_view text, double font_px) {
  int thousandths = 0;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      thousandths += kCharacterWidths[byte - 0x20];
    } else if (byte >= 0xc0 || byte < 0x20 || byte == 0x7f) {  // a character's first byte (not 0x80-0xbf)
      thousandths += kOtherWidth;
    }
  }
  return thousandths * font_px / 1000.0;
}

bool drawable(double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && std::abs(x) <= kLargestDrawn && std::abs(y) <= kLargestDrawn;
}

struct Range {
  double low = std::numeric_limits<double>::infinity(), high = -std::numeric_limits<double>::infinity();
  void add(double value) { low = std::min(low, value), high = std::max(high, value); }
  bool empty() const { return !(low <= high); }
};

// The axis for values spanning `covered`: padded by 5% each way, not below 0 where no value is. A single
// value is shown with 0 (a lone step in the run from 0 to it, a constant beside its zero), the way a
// reader compares it.
Range axis_range(Range covered) {
  if (!(covered.high > covered.low)) {
    const double value = covered.low;
    covered = value == 0 ? Range{0, 1} : Range{std::min(0.0, value), std::max(0.0, value)};
  }
  const double pad = 0.05 * (covered.high - covered.low);
  Range axis{covered.low - pad, covered.high + pad};
  if (covered.low >= 0) axis.low = std::max(0.0, axis.low);
  if (!(axis.high > axis.low)) axis = {covered.low - 1, covered.high + 1};  // padding lost in rounding
  return axis;
}

// How many multiples of `step` lie in `range`.
double multiples_in(const Range& range, double step) {
  return std::floor(range.high / step + 1e-9) - std::ceil(range.low / step) + 1;
}

// The tick step: the largest 1, 2 or 5 x 10^k with at least kMinTicks ticks in `range` (a fifth of the span
// rounded down to a power of ten always has kTargetTicks), and at least `min_step` (whole steps on x).
double tick_step(const Range& range, double min_step) {
  const double raw = (range.high - range.low) / kTargetTicks;
  if (!(raw > 0) || !std::isfinite(raw)) return 0;  // a span so small that a fifth of it is 0
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double factor : {10.0, 5.0, 2.0}) {
    if (multiples_in(range, factor * magnitude) >= kMinTicks) {
      step = factor * magnitude;
      break;
    }
  }
  return std::max(step, min_step);
}

// Ticks at multiples of `step` inside `range`. Where the values are so close that the step is below their
// spacing (1e17 and 1e17 + 16), neighbouring ticks round to one value and are drawn once.
std::vector<double> ticks(const Range& range, double step) {
  if (!(step > 0) || !std::isfinite(step)) return {};
  const double first = std::ceil(range.low / step);
  const int count = static_cast<int>(std::clamp(multiples_in(range, step), 0.0, 4.0 * kTargetTicks));
  std::vector<double> values;
  for (int i = 0; i < count; ++i) {
    const double tick = (first + i) * step;
    const double value = std::abs(tick) < 1e-12 * step ? 0.0 : tick;
    if (values.empty() || value != values.back()) values.push_back(value);
  }
  return values;
}

// A tick's label with as many decimals as its step needs, so neighbouring ticks never read alike (4
// significant digits printed 2.0001 and 2.0002 both as "2"); beyond ordinary magnitudes, the shortest text
// that reads back as the value.
std::string tick_label(double value, double step) {
  if (std::abs(value) < 1e12 && step >= 1) return with_thousands(std::llround(value));
  if (std::abs(value) < 1e12 && step >= 1e-9) {
    const int decimals = static_cast<int>(-std::floor(std::log10(step) + 1e-9));
    return fmt::format("{:.{}f}", value, decimals);
  }
  return fmt::format("{}", value);
}

// A series' drawn points: (x, bottom, top); bottom == top except for a stacked area.
struct DrawnPoint {
  double x = 0, bottom = 0, top = 0;
};

// Each series' points that can be drawn, index for index with its `points` (nullopt where left out); a
// stacked series stands on the stacked series before it where that has a point at the same index and step.
std::vector<std::vector<std::optional<DrawnPoint>>> drawn_points(const Chart& chart) {
  std::vector<std::vector<std::optional<DrawnPoint>>> drawn;
  std::optional<size_t> below;  // the last stacked series so far
  for (const ChartSeries& series : chart.series) {
    std::vector<std::optional<DrawnPoint>> points;
    const bool stacked = series.style == SeriesStyle::kStacked;
    for (size_t i = 0; i < series.points.size(); ++i) {
      const auto [x, y] = series.points[i];
      double base = 0;
      if (stacked && below && i < drawn[*below].size() && drawn[*below][i] && drawn[*below][i]->x == x)
        base = drawn[*below][i]->top;
      const double top = stacked ? base + y : y;
      if (drawable(x, y) && drawable(x, top)) {
        points.push_back(DrawnPoint{x, stacked ? base : top, top});
      } else {
        points.push_back(std::nullopt);
      }
    }
    if (stacked) below = drawn.size();
    drawn.push_back(std::move(points));
  }
  return drawn;
}

// The legend: one entry per labelled series, in rows under the title, each entry as wide as its swatch and
// its text; returns the SVG and the number of rows.
std::pair<std::string, int> legend_svg(const Chart& chart) {
  std::string svg;
  double x = kLeft;
  int row = 0;
  bool any = false;
  for (const ChartSeries& series : chart.series) {
    if (series.label.empty()) continue;
    const double text_width = text_width_px(series.label, kLegendFontPx);
    const double entry_width = kSwatchWidth + kSwatchGap + text_width;
    if (any && x + entry_width > kLeft + kWidth) {
      x = kLeft;
      ++row;
    }
    any = true;
    const double middle = kTitleHeight + 8 + row * kLegendRowHeight;  // the swatch's centre line
    switch (series.style) {
      case SeriesStyle::kStacked:
        svg += fmt::format("<rect class=\"swatch\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"8\" fill=\"{}\"/>",
                           x, middle - 4, kSwatchWidth, series.color);
        break;
      case SeriesStyle::kMarkers:
        svg += fmt::format("<circle class=\"swatch\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"/>",
                           x + kSwatchWidth / 2, middle, series.color);
        break;
      default:
        svg += fmt::format(
            "<line class=\"swatch\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" "
            "stroke-width=\"3\"/>",
            x, middle, x + kSwatchWidth, series.color);
    }
    svg += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n", x + kSwatchWidth + kSwatchGap,
                       middle + 4, html_escape(series.label));
    x += entry_width + kEntryGap;
  }
  return {svg, any ? row + 1 : 1};
}

// The chart's events over the series, at their steps on the x axis `xs`: dashed lines, each labelled in the
// event's colour (a style: the page's stylesheet sets every text's fill), in kEventLabelRows rows down from
// the plot's `top` so that close ones do not overlap.
std::string events_svg(const Chart& chart, const Range& xs, double top) {
  std::string svg;
  for (size_t e = 0; e < chart.events.size(); ++e) {
    const ChartEvent& event = chart.events[e];
    if (!drawable(event.step, 0)) continue;
    const double x = kLeft + (event.step - xs.low) / (xs.high - xs.low) * kWidth;
    svg += fmt::format(
        "<line class=\"event\" data-label=\"{0}\" x1=\"{1:.1f}\" y1=\"{2}\" x2=\"{1:.1f}\" y2=\"{3}\" "
        "stroke=\"{4}\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/><text class=\"event-label\" "
        "x=\"{5:.1f}\" y=\"{6}\" style=\"fill:{4}\">{0}</text>\n",
        html_escape(event.label), x, top, top + kHeight, event.color, x + 3,
        top + kLegendRowHeight * static_cast<double>(1 + e % kEventLabelRows));
  }
  return svg;
}

}  // namespace

bool chart_has_data(const Chart& chart) {
  return chart_y_range(chart).has_value();
}

std::optional<AxisExtent> chart_y_range(const Chart& chart) {
  Range range;
  for (const auto& points : drawn_points(chart)) {
    for (const std::optional<DrawnPoint>& point : points) {
      if (!point) continue;
      range.add(point->bottom);
      range.add(point->top);
    }
  }
  if (range.empty()) return std::nullopt;
  return AxisExtent{range.low, range.high};
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
  const auto drawn = drawn_points(chart);
  Range x_data, y_data;
  for (const auto& points : drawn) {
    for (const std::optional<DrawnPoint>& point : points) {
      if (!point) continue;
      x_data.add(point->x);
      y_data.add(point->bottom);
      y_data.add(point->top);
    }
  }
  const auto [legend, legend_rows] = legend_svg(chart);
  const double top = kTitleHeight + legend_rows * kLegendRowHeight + 6;  // the plot area's top edge
  const double total_width = kLeft + kWidth + kRight, total_height = top + kHeight + kBottom;
  std::string svg = fmt::format(
      "<figure class=\"chart\" data-chart=\"{}\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} "
      "{}\" role=\"img\" aria-label=\"{}\">\n<text class=\"title\" x=\"{}\" y=\"16\">{}</text>\n",
      html_escape(chart.id), total_width, total_height, html_escape(chart.title), kLeft,
      html_escape(chart.title));
  svg += legend;
  if (x_data.empty()) {
    return svg + fmt::format("<text class=\"empty\" x=\"{}\" y=\"{}\">not recorded</text></svg></figure>\n",
                             kLeft + kWidth / 2, top + kHeight / 2);
  }
  for (const ChartEvent& event : chart.events) {
    if (drawable(event.step, 0)) x_data.add(event.step);
  }
  // The extents widen the axes; one out of the drawable range is ignored as a value would be.
  if (chart.x_extent && drawable(chart.x_extent->low, chart.x_extent->high)) {
    x_data.add(chart.x_extent->low);
    x_data.add(chart.x_extent->high);
  }
  if (chart.y_extent && drawable(chart.y_extent->low, chart.y_extent->high)) {
    y_data.add(chart.y_extent->low);
    y_data.add(chart.y_extent->high);
  }
  const Range xs = axis_range(x_data), ys = axis_range(y_data);
  auto px = [&](double x) { return kLeft + (x - xs.low) / (xs.high - xs.low) * kWidth; };
  auto py = [&](double y) { return top + kHeight - (y - ys.low) / (ys.high - ys.low) * kHeight; };

  svg += fmt::format("<rect class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", kLeft, top,
                     kWidth, kHeight);
  const double y_step = tick_step(ys, 0);
  for (const double tick : ticks(ys, y_step)) {
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/><text class=\"tick y\" "
        "x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, py(tick), kLeft + kWidth, kLeft - 6, py(tick) + 4, tick_label(tick, y_step));
  }
  const double x_step = tick_step(xs, 1);  // x is a step: whole numbers
  for (const double tick : ticks(xs, x_step)) {
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/><text class=\"tick x\" "
        "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px(tick), top, top + kHeight, top + kHeight + 16, tick_label(tick, x_step));
  }
  svg += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     kLeft + kWidth / 2, total_height - 4, html_escape(chart.x_label));
  // Areas first, under the lines and markers.
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const ChartSeries& series = chart.series[s];
    if (series.style != SeriesStyle::kStacked) continue;
    std::string upper, lower;
    for (const std::optional<DrawnPoint>& point : drawn[s]) {
      if (!point) continue;
      upper += fmt::format("{:.1f},{:.1f} ", px(point->x), py(point->top));
      lower = fmt::format("{:.1f},{:.1f} ", px(point->x), py(point->bottom)) + lower;
    }
    if (upper.empty()) continue;
    svg += fmt::format(
        "<polygon class=\"area\" data-label=\"{}\" points=\"{}\" fill=\"{}\" fill-opacity=\"0.7\" "
        "stroke=\"{}\"/>\n",
        html_escape(series.label), upper + lower.substr(0, lower.size() - 1), series.color, series.color);
  }
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const ChartSeries& series = chart.series[s];
    if (series.style == SeriesStyle::kStacked) continue;
    if (series.style != SeriesStyle::kMarkers) {
      std::string points;
      for (const std::optional<DrawnPoint>& point : drawn[s]) {
        if (point) points += fmt::format("{:.1f},{:.1f} ", px(point->x), py(point->top));
      }
      if (points.empty()) continue;
      points.pop_back();
      const bool faint = series.style == SeriesStyle::kFaintLine;
      svg += fmt::format(
          "<polyline class=\"series\" data-label=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"{}\" stroke-opacity=\"{}\"/>\n",
          html_escape(series.label), points, series.color, faint ? 1 : 2, faint ? 0.3 : 1);
    }
    if (series.style != SeriesStyle::kMarkers && series.style != SeriesStyle::kLineAndDots) continue;
    const bool marker = series.style == SeriesStyle::kMarkers;
    for (const std::optional<DrawnPoint>& point : drawn[s]) {
      if (!point) continue;
      svg += fmt::format(
          "<circle class=\"{}\" data-label=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"/>\n",
          marker ? "marker" : "dot", html_escape(series.label), px(point->x), py(point->top),
          marker ? 3.5 : 3, series.color);
    }
  }
  svg += events_svg(chart, xs, top);
  return svg + "</svg></figure>\n";
}

}  // namespace nanoforge
