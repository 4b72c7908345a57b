// `nanoforge report` on hostile run directories and outputs (issue 39's probe): it never writes over what it
// reads, nor through a link or into a pipe at its temporary name; it never waits on a pipe or device found
// where a file should be; looping or unreadable links end in a message naming the path, not an abort; and
// any values a metrics record may hold (one ulp apart, ±1e308, missing) make a page, quickly.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;
using nanoforge::test::ProgramRun;

// Programs under AddressSanitizer or ThreadSanitizer reserve terabytes of address space: no `ulimit -v`.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

constexpr int kHung = 124;  // timeout(1)'s status when the bound below ran out

// `nanoforge report ARGUMENTS`, stdout and stderr, ended after 60 s (a report of these runs takes
// milliseconds) and, where no sanitizer forbids it, with 4 GiB of address space (the probe's bad_alloc).
ProgramRun report(const std::string& arguments, const std::string& user = "") {
  const std::string limit = kSanitized ? "" : "ulimit -v 4194304; ";
  return nanoforge::test::run_command(limit + user + "timeout -k 5 60 " +
                                      nanoforge::test::nanoforge_binary() + " report " + arguments + " 2>&1");
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), {}};
}

// An empty folder under the test's temporary directory (emptied first: a test may run twice in one process).
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A run directory as training leaves it: records, config, a checkpoint, a CORE result.
fs::path make_run(const std::string& name) {
  const fs::path run = fresh_dir(name);
  write(run / "metrics.jsonl",
        "{\"step\": 1, \"loss\": 3.5, \"lr_multiplier\": 1, \"grad_norm\": 0.9, \"tokens_per_s\": 1000}\n"
        "{\"step\": 2, \"loss\": 3.25, \"lr_multiplier\": 1, \"grad_norm\": 0.8, \"tokens_per_s\": 1100}\n"
        "{\"step\": 2, \"val_bpb\": 1.5}\n"
        "{\"step\": 2, \"sample\": \"And God said\"}\n");
  write(run / "config.toml", "[train]\nnum_iterations = 2\n");
  write(run / "core.json",
        "{\"step\": 2, \"core_metric\": 0.05, \"centered_results\": {\"hellaswag\": 0.1}}");
  write(run / "checkpoints" / "latest", "step_000002\n");
  write(run / "checkpoints" / "step_000002" / "model.h5", "the run's weights");
  return run;
}

// Every polyline's points are numbers (no nan or inf from a degenerate axis).
void expect_plain_coordinates(const std::string& page) {
  for (size_t at = page.find("points=\""); at != std::string::npos; at = page.find("points=\"", at + 1)) {
    const size_t begin = at + 8, end = page.find('"', begin);
    const std::string points = page.substr(begin, end - begin);
    EXPECT_EQ(points.find_first_not_of("0123456789.,- "), std::string::npos) << points;
  }
}

TEST(Report, AnOutputThatIsAFileTheReportReadsIsRefusedAndTheFileKept) {
  const fs::path run = make_run("run"), alias = fresh_dir("alias") / "run";
  fs::create_symlink(run, alias);
  const std::vector<std::pair<fs::path, std::string>> inputs = {
      {run / "metrics.jsonl", "which the report reads"},
      {run / "config.toml", "which the report reads"},
      {run / "core.json", "which the report reads"},
      {run / "checkpoints" / "step_000002" / "model.h5", "which the report reads"},
      {run / "checkpoints" / "latest", "is inside " + run.string() + "/checkpoints"},
      {run / "checkpoints" / "report.html", "is inside " + run.string() + "/checkpoints"},
      {run / "." / "checkpoints" / ".." / "metrics.jsonl", "which the report reads"},
      {alias / "config.toml", "which the report reads"},
      {alias / "checkpoints" / "step_000002" / "new.html", "is inside " + run.string() + "/checkpoints"}};
  for (const auto& [out, expected] : inputs) {
    const std::string before = read(out);
    const ProgramRun refused = report(run.string() + " --out " + out.string());
    EXPECT_EQ(refused.exit_code, 1) << out << "\n" << refused.output;
    EXPECT_NE(refused.output.find("--out " + out.string()), std::string::npos) << refused.output;
    EXPECT_NE(refused.output.find(expected), std::string::npos) << expected << " not in\n" << refused.output;
    EXPECT_EQ(read(out), before) << out;
  }
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "report.html"));
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "step_000002" / "new.html"));
  for (int time = 0; time < 2; ++time) {  // beside the run's files, and again over the earlier page
    const ProgramRun made = report(run.string() + " --out " + (run / "report.html").string());
    EXPECT_EQ(made.exit_code, 0) << made.output;
  }
  EXPECT_NE(read(run / "report.html").find("And God said"), std::string::npos);
}

TEST(Report, NothingIsWrittenThroughALinkOrIntoAPipeAtTheTemporaryName) {
  const fs::path run = make_run("run"), dir = fresh_dir("outputs");
  write(dir / "victim", "precious");
  fs::create_symlink(dir / "victim", dir / "linked.html.tmp");
  const ProgramRun linked = report(run.string() + " --out " + (dir / "linked.html").string());
  EXPECT_EQ(linked.exit_code, 1) << linked.output;
  EXPECT_NE(linked.output.find((dir / "linked.html.tmp").string() + " already exists (a symbolic link)"),
            std::string::npos)
      << linked.output;
  EXPECT_EQ(read(dir / "victim"), "precious");
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "linked.html")));

  ASSERT_EQ(::mkfifo((dir / "piped.html.tmp").c_str(), 0600), 0);
  const ProgramRun piped = report(run.string() + " --out " + (dir / "piped.html").string());
  EXPECT_NE(piped.exit_code, kHung) << "the report waited for a reader of piped.html.tmp";
  EXPECT_EQ(piped.exit_code, 1) << piped.output;
  EXPECT_NE(piped.output.find("piped.html.tmp already exists (a pipe)"), std::string::npos) << piped.output;
}

TEST(Report, APipeOrDeviceWhereARunFileShouldBeIsLeftOutWithoutWaiting) {
  const fs::path run = make_run("run"), out = fs::temp_directory_path() / "report.html";
  fs::remove(run / "config.toml");
  fs::remove(run / "core.json");
  ASSERT_EQ(::mkfifo((run / "config.toml").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((run / "core.json").c_str(), 0600), 0);
  const ProgramRun piped = report(run.string() + " --out " + out.string());
  EXPECT_NE(piped.exit_code, kHung) << "the report waited for a writer of config.toml or core.json";
  EXPECT_EQ(piped.exit_code, 0) << piped.output;
  for (const std::string name : {"config.toml", "core.json"}) {
    const std::string note = (run / name).string() + " is a pipe, not a regular file";
    EXPECT_NE(piped.output.find("warning: report: left out: " + note), std::string::npos) << piped.output;
    EXPECT_NE(read(out).find("left out: " + note), std::string::npos) << note << " not on the page";
  }
  fs::remove(run / "config.toml");
  fs::create_symlink("/dev/zero", run / "config.toml");  // read as a file, it never ends
  const ProgramRun device = report(run.string() + " --out " + out.string());
  EXPECT_EQ(device.exit_code, 0) << device.output;
  EXPECT_NE(device.output.find((run / "config.toml").string() + " is a device, not a regular file"),
            std::string::npos)
      << device.output;

  fs::remove(run / "metrics.jsonl");
  ASSERT_EQ(::mkfifo((run / "metrics.jsonl").c_str(), 0600), 0);
  const ProgramRun no_metrics = report(run.string() + " --out " + out.string());
  EXPECT_EQ(no_metrics.exit_code, 1) << no_metrics.output;
  EXPECT_NE(no_metrics.output.find("metrics.jsonl is a pipe, not a regular file"), std::string::npos)
      << no_metrics.output;
}

// Larger than a config can be, or nested deeper than the parsers go: left out, named, the page made.
TEST(Report, AConfigOrCoreResultTooLargeOrTooDeepIsLeftOut) {
  const fs::path run = make_run("run"), out = fs::temp_directory_path() / "report.html";
  write(run / "config.toml", "[train]\n# " + std::string(2 << 20, 'x') + "\nnum_iterations = 2\n");
  const std::string size = std::to_string(fs::file_size(run / "config.toml"));
  const ProgramRun large = report(run.string() + " --out " + out.string());
  EXPECT_EQ(large.exit_code, 0) << large.output;
  EXPECT_NE(large.output.find((run / "config.toml").string() + ": " + size + " bytes, more than the 1048576"),
            std::string::npos)
      << large.output;

  const int depth = 100000;
  write(run / "config.toml", "[train]\na = " + std::string(depth, '[') + std::string(depth, ']') + "\n");
  write(run / "core.json", "{\"step\": 2, \"core_metric\": 0.05, \"centered_results\": " +
                               std::string(depth, '[') + std::string(depth, ']') + "}");
  const ProgramRun deep = report(run.string() + " --out " + out.string());
  EXPECT_EQ(deep.exit_code, 0) << deep.output;
  EXPECT_NE(deep.output.find((run / "config.toml").string() + ":2:"), std::string::npos) << deep.output;
  EXPECT_NE(deep.output.find("not TOML: "), std::string::npos) << deep.output;
  EXPECT_NE(deep.output.find((run / "core.json").string() + ": not a JSON object: "), std::string::npos)
      << deep.output;
}

// The probe's links: metrics.jsonl, the run directory and a checkpoint each a link to itself.
TEST(Report, LoopingLinksEndInAMessageNamingThePath) {
  const fs::path dir = fresh_dir("loops"), out = dir / "report.html";
  const fs::path looping_metrics = make_run("looping_metrics");
  fs::remove(looping_metrics / "metrics.jsonl");
  fs::create_symlink("metrics.jsonl", looping_metrics / "metrics.jsonl");
  const ProgramRun metrics = report(looping_metrics.string() + " --out " + out.string());
  EXPECT_EQ(metrics.exit_code, 1) << metrics.output;
  EXPECT_NE(metrics.output.find((looping_metrics / "metrics.jsonl").string() +
                                ": cannot open: Too many levels of symbolic links"),
            std::string::npos)
      << metrics.output;

  fs::create_symlink("looping_run", dir / "looping_run");
  const ProgramRun run_dir = report((dir / "looping_run").string() + " --out " + out.string());
  EXPECT_EQ(run_dir.exit_code, 1) << run_dir.output;
  EXPECT_NE(run_dir.output.find((dir / "looping_run").string() + ": no metrics.jsonl to report on"),
            std::string::npos)
      << run_dir.output;

  const fs::path run = make_run("run");
  fs::create_symlink("step_000009", run / "checkpoints" / "step_000009");
  fs::create_symlink("optimizer.h5", run / "checkpoints" / "step_000002" / "optimizer.h5");
  const ProgramRun checkpoint = report(run.string() + " --out " + out.string());
  EXPECT_EQ(checkpoint.exit_code, 0) << checkpoint.output;
  for (const std::string& note :
       {"left out: " + (run / "checkpoints" / "step_000009").string() + ": Too many levels of symbolic links",
        "left out: " + (run / "checkpoints" / "step_000002" / "optimizer.h5").string() +
            ", from its checkpoint's size: Too many levels of symbolic links"}) {
    EXPECT_NE(checkpoint.output.find(note), std::string::npos) << note << " not in\n" << checkpoint.output;
  }
  EXPECT_NE(read(out).find("<td>step_000002</td>"), std::string::npos) << "the readable checkpoint is listed";

  const fs::path looping_checkpoints = make_run("looping_checkpoints");
  fs::remove_all(looping_checkpoints / "checkpoints");
  fs::create_symlink("checkpoints", looping_checkpoints / "checkpoints");
  const ProgramRun root = report(looping_checkpoints.string() + " --out " + out.string());
  EXPECT_EQ(root.exit_code, 0) << root.output;
  EXPECT_NE(root.output.find((looping_checkpoints / "checkpoints").string() +
                             ": cannot list it: Too many levels of symbolic links"),
            std::string::npos)
      << root.output;
}

// A checkpoint that is a link into a directory the reader may not enter. Root enters any, so as root the
// report runs as nobody (setpriv).
TEST(Report, ACheckpointLinkedToAnUnreadablePlaceIsLeftOut) {
  const fs::path dir = fs::temp_directory_path(), run = make_run("run"), out = dir / "pages" / "report.html";
  std::string user;
  if (geteuid() == 0) {
    user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    const std::string can_run = user + "test -x " + nanoforge::test::nanoforge_binary();
    if (nanoforge::test::run_command(can_run + " 2>/dev/null").exit_code != 0)
      GTEST_SKIP() << "nobody cannot run the program here (" << can_run << ")";
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  }
  fs::create_directories(dir / "locked" / "step_000003");
  fs::permissions(dir / "locked", fs::perms::owner_all);  // only its owner (root, or this user) enters it
  if (geteuid() != 0) fs::permissions(dir / "locked", fs::perms::none);
  fs::create_directories(out.parent_path());
  fs::permissions(out.parent_path(), fs::perms::all);
  fs::create_symlink(dir / "locked" / "step_000003", run / "checkpoints" / "step_000003");
  const ProgramRun made = report(run.string() + " --out " + out.string(), user);
  fs::permissions(dir / "locked", fs::perms::owner_all);
  EXPECT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(
      made.output.find("left out: " + (run / "checkpoints" / "step_000003").string() + ": Permission denied"),
      std::string::npos)
      << made.output;
  EXPECT_NE(read(out).find("<td>step_000002</td>"), std::string::npos);
}

// The probe's bad_alloc: 1e17 and 1e17 + 16 are one ulp apart, below the tick step (5), which the tick loop
// added to 1e17 for ever. Also steps so large that +-1 does not widen the axis, values near the double's
// limits and beyond them, records missing a field, and nesting deeper than any parser's stack.
TEST(Report, AnyValuesARecordMayHoldMakeAPage) {
  const fs::path out = fs::temp_directory_path() / "report.html";
  const fs::path ulp = fs::temp_directory_path() / "ulp";
  write(ulp / "metrics.jsonl",
        "{\"step\": 1, \"val_bpb\": 1e17}\n{\"step\": 2, \"val_bpb\": 100000000000000016}\n"
        "{\"step\": 100000000000000000, \"loss\": 1}\n{\"step\": 100000000000000016, \"loss\": 2}\n");
  const ProgramRun close_values = report(ulp.string() + " --out " + out.string());
  EXPECT_NE(close_values.exit_code, kHung);
  EXPECT_EQ(close_values.exit_code, 0) << close_values.output;
  expect_plain_coordinates(read(out));

  const fs::path extreme = fs::temp_directory_path() / "extreme";
  write(extreme / "metrics.jsonl",
        "{\"step\": 1, \"loss\": 1.7e308, \"grad_norm\": -1.7e308, \"tokens_per_s\": 1000}\n"
        "{\"step\": 2, \"loss\": -1.7e308, \"grad_norm\": 1e300, \"tokens_per_s\": 1e400}\n"
        "{\"step\": 3, \"loss\": 2, \"grad_norm\": 1e-320}\n"
        "{\"step\": 4, \"loss\": 2, \"grad_norm\": 1.5e-320, \"tokens_per_s\": 3000}\n"
        "{\"step\": 9223372036854775807, \"val_bpb\": 1}\n" +
            std::string(100000, '[') + "\n");
  const ProgramRun extremes = report(extreme.string() + " --out " + out.string());
  EXPECT_EQ(extremes.exit_code, 0) << extremes.output;
  const std::string page = read(out);
  expect_plain_coordinates(page);
  EXPECT_NE(page.find("<td>3,000</td></tr>"), std::string::npos) << "the median of the recorded rates";
  EXPECT_EQ(page.find("-9,223,372,036,854,775,808"), std::string::npos) << "a NaN rate cast to an integer";

  const fs::path one_step = fs::temp_directory_path() / "one_step";
  write(one_step / "metrics.jsonl", "{\"step\": 100000000000000000, \"loss\": 1}\n");
  const ProgramRun single = report(one_step.string() + " --out " + out.string());
  EXPECT_EQ(single.exit_code, 0) << single.output;
  expect_plain_coordinates(read(out));
}

// --- The page as a reader sees it (issue 40): the SVG and HTML parsed back. ---

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
