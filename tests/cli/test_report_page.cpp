// `nanoforge report`'s page as a reader sees it (issue 40): the SVG and HTML parsed back — config floats as
// written, the time per step stacked, legends that do not overlap, readable axes, shared scales. Hostile
// run directories and outputs are test_report.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/report_runs.h"

namespace {

namespace fs = std::filesystem;
using nanoforge::test::fresh_dir;
using nanoforge::test::make_run;
using nanoforge::test::ProgramRun;
using nanoforge::test::read;
using nanoforge::test::report;
using nanoforge::test::write;

// The <figure> of chart `id` in `page`; empty when there is none.
std::string chart_of(const std::string& page, const std::string& id) {
  const size_t begin = page.find("data-chart=\"" + id + "\"");
  if (begin == std::string::npos) return "";
  return page.substr(begin, page.find("</figure>", begin) - begin);
}

// Every element of `svg` that starts with `open` (e.g. "<polygon"), whole.
std::vector<std::string> elements(const std::string& svg, const std::string& open) {
  std::vector<std::string> found;
  for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1))
    found.push_back(svg.substr(at, svg.find('>', at) - at + 1));
  return found;
}

std::string attribute(const std::string& element, const std::string& name) {
  const size_t begin = element.find(" " + name + "=\"");
  if (begin == std::string::npos) return "";
  const size_t value = begin + name.size() + 3;
  return element.substr(value, element.find('"', value) - value);
}

double number_attribute(const std::string& element, const std::string& name) {
  return std::stod(attribute(element, name));
}

// The text of the <text> elements of `svg` whose opening tag holds `marker`.
std::vector<std::string> texts(const std::string& svg, const std::string& marker) {
  std::vector<std::string> found;
  for (const std::string& element : elements(svg, "<text")) {
    if (element.find(marker) == std::string::npos) continue;
    const size_t begin = svg.find(element) + element.size();
    found.push_back(svg.substr(begin, svg.find("</text>", begin) - begin));
  }
  return found;
}

// The (x, y) pairs of a points="..." attribute.
std::vector<std::pair<double, double>> point_list(const std::string& points) {
  std::vector<std::pair<double, double>> list;
  std::istringstream stream(points);
  std::string pair;
  while (stream >> pair) {
    const size_t comma = pair.find(',');
    list.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return list;
}

// A run of `steps` training records (step_ms of `step_ms`, 2 ms exposed communication, 3 ms data wait),
// checkpoints at two steps, and `extra` records.
fs::path make_timed_run(const std::string& name, int steps, double step_ms, const std::string& extra = "") {
  const fs::path run = fresh_dir(name);
  std::string records;
  for (int step = 1; step <= steps; ++step) {
    records += "{\"step\": " + std::to_string(step) + ", \"loss\": " + std::to_string(4.0 - 0.001 * step) +
               ", \"step_ms\": " + std::to_string(step_ms) +
               ", \"exposed_comm_ms\": 2, \"data_wait_ms\": 3}\n";
  }
  write(run / "metrics.jsonl", records +
                                   "{\"step\": 2, \"checkpoint_ms\": 7}\n"
                                   "{\"step\": " +
                                   std::to_string(steps) + ", \"checkpoint_ms\": 9}\n" + extra);
  return run;
}

std::string report_page(const std::string& runs, const std::string& name) {
  const fs::path out = fs::temp_directory_path() / (name + ".html");
  const ProgramRun made = report(runs + " --out " + out.string());
  EXPECT_EQ(made.exit_code, 0) << made.output;
  return read(out);
}

// config.toml's floats as it writes them (the shortest text that reads back), not with binary noise.
TEST(Report, ConfigFloatsShowAsTheirShortestText) {
  const fs::path run = make_run("config_floats");
  write(run / "config.toml",
        "[optim]\nembedding_lr = 0.3\nunembedding_lr = 0.004\nbetas = [0.8, 0.95]\nfinal_lr_frac = 1.0\n"
        "tiny = 1e-05\n[train]\nnum_iterations = 2\n");
  const std::string page = report_page(run.string(), "config_floats");
  const size_t begin = page.find("<table class=\"config\">");
  ASSERT_NE(begin, std::string::npos);
  const std::string table = page.substr(begin, page.find("</table>", begin) - begin);
  for (const char* cell : {"<td>0.3</td>", "<td>0.004</td>", "<td>[0.8, 0.95]</td>", "<td>1.0</td>",
                           "<td>1e-05</td>", "<td>2</td>"})
    EXPECT_NE(table.find(cell), std::string::npos) << cell << " not in\n" << table;
  // No number in the table with more than 12 significant digits (0.29999999999999999 has 17).
  const std::regex long_number("[0-9]\\.?[0-9]{12,}");
  EXPECT_FALSE(std::regex_search(table, long_number)) << table;
}

// The time per step is stacked: each part's area stands on the one before, its top the running sum; the
// checkpoints are separate markers, not a line through them.
TEST(Report, TimePerStepIsStackedAndCheckpointsAreMarkers) {
  const fs::path run = make_timed_run("stacked", 3, 10);
  const std::string svg = chart_of(report_page(run.string(), "stacked"), "time-stacked");
  ASSERT_FALSE(svg.empty());
  const std::vector<std::string> plot = elements(svg, "<rect class=\"plot\"");
  ASSERT_EQ(plot.size(), 1u);
  const double baseline = number_attribute(plot[0], "y") + number_attribute(plot[0], "height");
  const std::vector<std::string> areas = elements(svg, "<polygon");
  ASSERT_EQ(areas.size(), 3u) << svg;
  const std::vector<std::string> labels = {"compute", "exposed communication", "data wait"};
  const std::vector<double> cumulative_ms = {5, 7, 10};  // compute 10 - 2 - 3, then + 2, then + 3
  std::vector<std::vector<std::pair<double, double>>> edges;
  for (size_t i = 0; i < areas.size(); ++i) {
    EXPECT_EQ(attribute(areas[i], "data-label"), labels[i]);
    edges.push_back(point_list(attribute(areas[i], "points")));
    ASSERT_EQ(edges[i].size(), 6u) << areas[i];  // 3 steps along the top, back along the bottom
  }
  const double data_wait_height = baseline - edges[2][0].second;
  for (size_t i = 0; i < areas.size(); ++i) {
    for (size_t step = 0; step < 3; ++step) {
      // Heights over the axis' 0 are in the ratio of the running sums; the pixels are printed to 0.1 of
      // a ~270-pixel height: 0.005 covers their rounding.
      EXPECT_NEAR((baseline - edges[i][step].second) / data_wait_height, cumulative_ms[i] / 10, 0.005)
          << labels[i] << " at step " << step + 1;
      // The bottom edge (reversed) is the top of the area below, or the axis' 0 for the first.
      const double bottom = edges[i][5 - step].second;
      EXPECT_NEAR(bottom, i == 0 ? baseline : edges[i - 1][step].second, 0.11) << labels[i];
    }
  }
  EXPECT_EQ(elements(svg, "<circle class=\"marker\" data-label=\"checkpoint\"").size(), 2u) << svg;
  EXPECT_EQ(svg.find("<polyline class=\"series\" data-label=\"checkpoint\""), std::string::npos) << svg;
}

// DejaVu Sans' advance widths (thousandths of the font size; the widest common sans-serif, what Chromium
// draws with on a Linux box without Arial) of the characters the legend test uses: an estimate made here,
// apart from the report's own.
double sans_width_px(const std::string& text) {
  const std::map<char, int> widths = {{'M', 863}, {'W', 989}, {'m', 974}, {'w', 818}, {'_', 500}, {'b', 635}};
  double thousandths = 0;
  for (const char c : text)
    thousandths += widths.at(c);
  return thousandths * 12 / 1000;  // svg text is 12 px
}

// Legend entries are laid out by their text's width: no label runs into the next swatch, and a row that
// would pass the chart's right edge wraps.
TEST(Report, LegendEntriesDoNotOverlap) {
  const std::vector<std::string> names = {"MMMMWWWWMMMM", "b", "wwwwmmmm_wwwwmmmm_wwww", "WMWMWMWMWMWMWM"};
  std::string dirs;
  for (const std::string& name : names)
    dirs += make_run(name).string() + " ";
  const std::string svg = chart_of(report_page(dirs, "legend"), "loss");
  ASSERT_FALSE(svg.empty());
  const std::vector<std::string> legend = elements(svg, "<text class=\"legend\"");
  ASSERT_EQ(legend.size(), names.size()) << svg;
  std::vector<double> swatch_x;
  for (const std::string& element : elements(svg, "<line"))
    if (attribute(element, "stroke-width") == "3") swatch_x.push_back(number_attribute(element, "x1"));
  ASSERT_EQ(swatch_x.size(), names.size()) << svg;
  for (size_t i = 0; i < legend.size(); ++i) {
    const double text_x = number_attribute(legend[i], "x"), text_y = number_attribute(legend[i], "y");
    const double right = text_x + sans_width_px(names[i]);
    EXPECT_LE(right, 624 + 1) << names[i] << " passes the plot's right edge";                // kLeft + kWidth
    if (i + 1 == legend.size() || number_attribute(legend[i + 1], "y") != text_y) continue;  // row ends
    EXPECT_GT(swatch_x[i + 1], right + 4) << names[i] << " runs into the next swatch";
  }
}

// Each axis has enough tick labels to read (a val bpb falling by 0.01 had two: "1" and "1.005"), no two
// alike; steps are whole numbers.
TEST(Report, AxesHaveEnoughDistinctTickLabels) {
  const fs::path run = make_timed_run("narrow", 3, 10,
                                      "{\"step\": 1, \"val_bpb\": 1.0}\n{\"step\": 2, \"val_bpb\": 1.0045}\n"
                                      "{\"step\": 3, \"val_bpb\": 1.0095}\n");
  const std::string svg = chart_of(report_page(run.string(), "narrow"), "val-bpb");
  const std::vector<std::string> y_labels = texts(svg, "text-anchor=\"end\"");
  EXPECT_GE(y_labels.size(), 4u) << svg;
  EXPECT_EQ(std::set<std::string>(y_labels.begin(), y_labels.end()).size(), y_labels.size()) << svg;
  const std::vector<std::string> x_labels = texts(svg, "text-anchor=\"middle\">");
  EXPECT_GE(x_labels.size(), 3u) << svg;  // steps 1, 2, 3 and the axis' name
  for (const std::string& label : x_labels)
    EXPECT_EQ(label.find('.'), std::string::npos) << "a fractional step: " << label;
}

// A CORE curve of one point (the last step) is drawn on the run's steps, not on 249..251.
TEST(Report, AOnePointCurveSpansTheRunsSteps) {
  const fs::path run = make_timed_run("one_point", 250, 10);
  write(run / "core.json",
        "{\"step\": 250, \"core_metric\": 0.05, \"centered_results\": {\"hellaswag\": 0.1}}");
  const std::string svg = chart_of(report_page(run.string(), "one_point"), "core");
  std::vector<double> steps;
  for (const std::string& label : texts(svg, "text-anchor=\"middle\">")) {
    if (label.find_first_not_of("0123456789,") == std::string::npos && !label.empty()) {
      std::string digits = label;
      digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
      steps.push_back(std::stod(digits));
    }
  }
  ASSERT_GE(steps.size(), 2u) << svg;
  EXPECT_LE(steps.front(), 50) << svg;  // the axis starts near the run's first step
  EXPECT_GE(steps.back(), 200) << svg;
  const std::vector<std::string> dots = elements(svg, "<circle class=\"dot\"");
  ASSERT_EQ(dots.size(), 1u) << svg;
  EXPECT_GT(number_attribute(dots[0], "cx"), 64 + 0.8 * 560) << "the point sits at the end of the run";
}

// Runs compared side by side share the time chart's y-scale: the same tick labels at the same heights.
TEST(Report, ComparedRunsShareTheTimeChartsScale) {
  const fs::path fast = make_timed_run("fast", 3, 10), slow = make_timed_run("slow", 3, 40);
  const std::string page = report_page(fast.string() + " " + slow.string(), "compared");
  const std::string fast_svg = chart_of(page, "time-fast"), slow_svg = chart_of(page, "time-slow");
  ASSERT_FALSE(fast_svg.empty());
  ASSERT_FALSE(slow_svg.empty());
  EXPECT_EQ(texts(fast_svg, "text-anchor=\"end\""), texts(slow_svg, "text-anchor=\"end\""));
  EXPECT_EQ(elements(fast_svg, "<line class=\"grid\" x1=\"64\""),
            elements(slow_svg, "<line class=\"grid\" x1=\"64\""));
}

// `nanoforge launch`'s re-formations: a dashed line on the loss curve at each step resumed from, labelled
// with the cause and the world sizes, and a table of them; a bad record is left out with a note. A run
// without re-formations has neither.
TEST(Report, ReformationsAreMarkedOnTheLossCurveAndListed) {
  const fs::path run = make_timed_run(
      "reformed", 8, 10,
      "{\"step\": 2, \"event\": \"reformation\", \"cause\": \"failure\", \"restart\": 1, "
      "\"previous_world_size\": 3, \"world_size\": 2, \"nodes_left\": \"2\", \"nodes_stayed\": \"0->0 "
      "1->1\", "
      "\"nodes_joined\": \"\", \"seconds_from_failure_to_resume\": 3.823, \"steps_redone\": 1, "
      "\"seconds_redone\": 0.5}\n"
      "{\"step\": 6, \"event\": \"reformation\", \"cause\": \"join\", \"restart\": 1, "
      "\"previous_world_size\": 2, \"world_size\": 3, \"nodes_left\": \"\", \"nodes_stayed\": \"0->0 1->1\", "
      "\"nodes_joined\": \"2\", \"seconds_from_failure_to_resume\": 1.2, \"steps_redone\": 0, "
      "\"seconds_redone\": 0}\n"
      "{\"step\": 7, \"event\": \"reformation\", \"restart\": \"two\"}\n");
  const std::string page = report_page(run.string(), "reformed");
  const std::string svg = chart_of(page, "loss");
  const std::vector<std::string> events = elements(svg, "<line class=\"event\"");
  ASSERT_EQ(events.size(), 2u) << svg;
  EXPECT_EQ(attribute(events[0], "data-label"), "restart 1: 3 -&gt; 2");
  EXPECT_EQ(attribute(events[1], "data-label"), "join: 2 -&gt; 3");
  EXPECT_EQ(texts(svg, "class=\"event-label\""),
            (std::vector<std::string>{"restart 1: 3 -&gt; 2", "join: 2 -&gt; 3"}));
  // Each line stands at its step: where the x-axis labels that step (ticks every 2 steps on 1..8).
  std::map<std::string, double> tick_x;
  for (const std::string& tick : elements(svg, "<text class=\"tick x\""))
    tick_x[texts(svg, tick.substr(0, tick.size() - 1)).at(0)] = number_attribute(tick, "x");
  ASSERT_TRUE(tick_x.count("2") && tick_x.count("6")) << svg;
  EXPECT_EQ(number_attribute(events[0], "x1"), tick_x["2"]);
  EXPECT_EQ(number_attribute(events[1], "x1"), tick_x["6"]);

  const size_t table_at = page.find("<table class=\"reformations\">");
  ASSERT_NE(table_at, std::string::npos) << page;
  const std::string table = page.substr(table_at, page.find("</table>", table_at) - table_at);
  EXPECT_NE(
      table.find("<tr><td>reformed</td><td>2</td><td>failure (restart 1)</td><td>3 -&gt; 2</td><td>2</td>"
                 "<td>-</td><td>3.8</td><td>1 (0.5 s)</td></tr>"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("<tr><td>reformed</td><td>6</td><td>join</td><td>2 -&gt; 3</td><td>-</td>"
                       "<td>2</td><td>1.2</td><td>0 (0.0 s)</td></tr>"),
            std::string::npos)
      << table;
  EXPECT_NE(page.find("the re-formation record at step 7 has no whole restart"), std::string::npos) << page;

  const std::string plain = report_page(make_timed_run("not_reformed", 8, 10).string(), "not_reformed");
  EXPECT_EQ(plain.find("class=\"event"), std::string::npos);
  EXPECT_EQ(plain.find("Re-formations"), std::string::npos);
  EXPECT_EQ(plain.find("reformations"), std::string::npos);
}

// --out may be a directory, as its help says: the page is report.html in it.
TEST(Report, AnOutputDirectoryGetsReportHtml) {
  const fs::path run = make_run("out_dir");
  const ProgramRun made = report(run.string() + " --out " + run.string());
  EXPECT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find((run / "report.html").string()), std::string::npos) << made.output;
  EXPECT_NE(read(run / "report.html").find("And God said"), std::string::npos);
  const ProgramRun missing = report(run.string() + " --out " + (run / "nowhere").string() + "/");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("no such directory"), std::string::npos) << missing.output;
}

}  // namespace
