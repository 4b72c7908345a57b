// What a re-formation by `nanoforge launch` leaves in the run (train/reformation_record.h): the record at the
// step resumed from, with its cause and the steps a failure made the run train again, counted by the resume
// that drops them from metrics.jsonl; the console line of a failure as the launch tests compare it, and of a
// join; and the end-of-run summary's line of restarts and time lost (none without re-formations).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "train/checkpoint/resume.h"
#include "train/reformation_record.h"
#include "train/run_summary.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kFailureUnixMs = 1765070000000;

LaunchReformation failure() {
  return {"failure", 1, 3, "2", "0->0 1->1", "", kFailureUnixMs};
}

fs::path fresh_run(const std::string& name) {
  const fs::path run = fs::temp_directory_path() / name;
  fs::remove_all(run);
  fs::create_directories(run);
  return run;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string read(const fs::path& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

TEST(ReformationRecord, AFailureKeepsItsConsoleLineAndRecordsTheCauseAndTheStepsRedone) {
  const ReformationRecord result =
      reformation_record(failure(), 2, 2, DroppedSteps{1, 0.25}, kFailureUnixMs + 3823);
  EXPECT_EQ(result.console_line,
            "re-formed by nanoforge launch (restart 1): world size 3 -> 2, nodes left: 2, stayed: 0->0 1->1, "
            "joined: none; resumed from step 2, 3.8 s after the failure\n");
  EXPECT_EQ(metric_json(result.record),
            "{\"step\": 2, \"event\": \"reformation\", \"cause\": \"failure\", \"restart\": 1, "
            "\"previous_world_size\": 3, \"world_size\": 2, \"nodes_left\": \"2\", \"nodes_stayed\": \"0->0 "
            "1->1\", \"nodes_joined\": \"\", \"seconds_from_failure_to_resume\": 3.823, \"steps_redone\": 1, "
            "\"seconds_redone\": 0.25}");
}

TEST(ReformationRecord, AJoinSaysWhichMachinesItTookIn) {
  const LaunchReformation join{"join", 1, 2, "", "0->0 1->1", "2", kFailureUnixMs};
  const ReformationRecord result = reformation_record(join, 5, 3, DroppedSteps{}, kFailureUnixMs + 1200);
  EXPECT_EQ(result.console_line,
            "re-formed by nanoforge launch to take in node 2: world size 2 -> 3, stayed: 0->0 1->1; resumed "
            "from step 5, 1.2 s after the stop\n");
  EXPECT_NE(
      metric_json(result.record).find("\"event\": \"reformation\", \"cause\": \"join\", \"restart\": 1"),
      std::string::npos);
}

// The steps trained after the checkpoint are the training records the resume drops: their number and their
// step_ms; checkpoints, evaluations and samples after it are dropped but are no steps.
TEST(ReformationRecord, TheStepsRedoneAreTheTrainingRecordsTheResumeDrops) {
  const fs::path metrics = fresh_run("steps_redone") / "metrics.jsonl";
  write(
      metrics,
      "{\"step\": 1, \"loss\": 4, \"step_ms\": 100}\n{\"step\": 2, \"loss\": 3.9, \"step_ms\": 110}\n"
      "{\"step\": 2, \"checkpoint_ms\": 5}\n{\"step\": 2, \"val_bpb\": 1.5}\n"
      "{\"step\": 3, \"loss\": 3.8, \"step_ms\": 250.5}\n{\"step\": 4, \"loss\": 3.7, \"step_ms\": 1.2e+03}\n"
      "{\"step\": 4, \"sample\": \"And God said\"}\n");
  const absl::StatusOr<DroppedSteps> dropped = trim_metrics_after(metrics.string(), 2);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->steps, 2);
  EXPECT_DOUBLE_EQ(dropped->seconds, 1.4505);  // (250.5 + 1200) ms
  EXPECT_EQ(read(metrics),
            "{\"step\": 1, \"loss\": 4, \"step_ms\": 100}\n{\"step\": 2, \"loss\": 3.9, \"step_ms\": 110}\n"
            "{\"step\": 2, \"checkpoint_ms\": 5}\n");
}

RunSummary summary_of(const fs::path& run) {
  return summarize_run({run.string(), 8, 8, 6, Device::kCpu, "cpu", 1.0, true});
}

// The summary counts the re-formations, restarts and joins, and the time lost (re-forming, and redoing the
// steps after the checkpoint); a record without a cause (written before it had one) is a failure's. A run
// without re-formations has no such line, nor figures in its record.
TEST(RunSummary, ReformationsAreCountedWithTheTimeTheyLostAndOnlyThen) {
  const std::string steps = "{\"step\": 1, \"loss\": 4, \"tokens_per_s\": 1000, \"step_ms\": 100}\n";
  const fs::path run = fresh_run("summary_reformed");
  write(run / "metrics.jsonl",
        steps +
            "{\"step\": 2, \"event\": \"reformation\", \"cause\": \"failure\", \"restart\": 1, "
            "\"previous_world_size\": 3, \"world_size\": 2, \"seconds_from_failure_to_resume\": 3.5, "
            "\"steps_redone\": 1, \"seconds_redone\": 0.5}\n"
            "{\"step\": 4, \"event\": \"reformation\", \"cause\": \"join\", \"restart\": 1, "
            "\"previous_world_size\": 2, \"world_size\": 3, \"seconds_from_failure_to_resume\": 1.5, "
            "\"steps_redone\": 0, \"seconds_redone\": 0}\n"
            "{\"step\": 6, \"event\": \"reformation\", \"restart\": 2, \"previous_world_size\": 3, "
            "\"world_size\": 2, \"seconds_from_failure_to_resume\": 4, \"steps_redone\": 2, "
            "\"seconds_redone\": 1.5}\n");
  const RunSummary summary = summary_of(run);
  EXPECT_NE(summary.text.find("  re-formations    3 (2 restarts after a failure, 1 to take machines in); "
                              "time lost 11.0s (9.0s re-forming, 2.0s redoing 3 steps)\n"),
            std::string::npos)
      << summary.text;
  const std::string record = metric_json(summary.record);
  EXPECT_NE(record.find("\"reformations\": 3, \"restarts\": 2, \"reforming_s\": 9, \"redone_s\": 2, "
                        "\"steps_redone\": 3"),
            std::string::npos)
      << record;

  const fs::path plain = fresh_run("summary_not_reformed");
  write(plain / "metrics.jsonl", steps);
  const RunSummary plain_summary = summary_of(plain);
  EXPECT_EQ(plain_summary.text.find("re-formations"), std::string::npos) << plain_summary.text;
  EXPECT_EQ(metric_json(plain_summary.record).find("\"reformations\""), std::string::npos);
}

}  // namespace
}  // namespace nanoforge
