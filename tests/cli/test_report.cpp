// `nanoforge report` on hostile run directories and outputs (issue 39's probe): it never writes over what it
// reads, nor through a link or into a pipe at its temporary name; it never waits on a pipe or device found
// where a file should be; looping or unreadable links end in a message naming the path, not an abort; and
// any values a metrics record may hold (one ulp apart, ±1e308, missing) make a page, quickly. The page as a
// reader sees it is test_report_page.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
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

constexpr int kHung = 124;  // timeout(1)'s status when report()'s time bound ran out

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

}  // namespace
