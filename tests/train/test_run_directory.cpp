// What a run does with its run directory and its data before training: a new run never overwrites an old
// one (the probe's lost checkpoints, overwritten config.toml and appended metrics), nor starts among files
// nanoforge did not write; a start that failed before its first step does not block its directory; --resume
// on a directory that has no checkpoint yet starts from step 0; --resume-from a missing directory says so; a
// step to stop at must be after the resumed one; a checkpoint beyond the horizon is refused, not reported
// "done"; a directory of validation shards is not training data; an evaluation larger than the validation
// shards is refused.
#include <fmt/format.h>

#include "data/shards/shard_writer.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge {
namespace {

using namespace test;

Recipe short_recipe() {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = 10;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = 5;
  return recipe;
}

TrainRunOptions resuming(const std::string& run, int64_t stop = -1) {
  TrainRunOptions options = stop_at(run, stop);
  options.resume = true;
  return options;
}

// A validation shard of one-token documents (BOS alone): an evaluation of it fails, as nothing has a byte.
std::string bos_only_validation_shard() {
  const std::string data = temp_dir("bos_only");
  const absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(kGolden);
  EXPECT_TRUE(tokenizer.ok());
  auto writer = ShardWriter::create(data + "/val_00000.h5",
                                    {tokenizer->vocab_size(), tokenizer->bos_id(), tokenizer->hash()});
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (int doc = 0; doc < 2000; ++doc)
    EXPECT_TRUE(writer->append_document({}).ok());
  EXPECT_TRUE(writer->finish().ok());
  return data + "/val_00000.h5";  // a shard named on its own needs no manifest
}

std::map<std::string, std::string> directory_contents(const std::string& root) {
  std::map<std::string, std::string> contents;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) contents[entry.path().string()] = read_bytes(entry.path().string());
  }
  return contents;
}

TEST(RunDirectory, ANewRunNeverReplacesAnExistingOne) {
  const std::string run = temp_dir("existing");
  ASSERT_TRUE(run_training(short_recipe(), stop_at(run, 5)).ok());
  const std::map<std::string, std::string> before = directory_contents(run);
  Recipe other = short_recipe();
  other.train.seed = 9;
  const absl::Status status = run_training(other, stop_at(run, -1));
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  for (const char* fragment : {"already holds a run", "checkpoints/latest", "metrics.jsonl", "config.toml",
                               "add --resume to continue it", "another --run-dir"}) {
    EXPECT_NE(status.message().find(fragment), std::string::npos) << fragment << ": " << status;
  }
  EXPECT_EQ(directory_contents(run), before) << "nothing in the run directory may change";
}

// Issue 40: a directory holding source files (here: the data directory of a checkout) is no run directory.
TEST(RunDirectory, ANewRunRefusesADirectoryOfOtherFiles) {
  const std::string run = temp_dir("foreign");
  std::ofstream(run + "/shard_writer.cpp") << "// a source file";
  std::ofstream(run + "/CMakeLists.txt") << "# a build file";
  const std::map<std::string, std::string> before = directory_contents(run);
  const absl::Status status = run_training(short_recipe(), stop_at(run, -1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("--run-dir " + run + " is not a directory of train's outputs: it holds " +
                                  run + "/CMakeLists.txt and 1 other entry that nanoforge did not write"),
            std::string::npos)
      << status;
  EXPECT_EQ(directory_contents(run), before) << "nothing in the directory may change";
}

// Issue 40: a start refused by its memory plan left config.toml and run.lock, and the retry with a smaller
// batch was refused ("already holds a run (config.toml): add --resume"); the refusal printed the memory
// table twice. Both starts are the program's, as a user runs them; the directory also keeps the user's
// console log, which is no foreign file.
TEST(RunDirectory, ARunRefusedByItsMemoryPlanDoesNotBlockItsDirectory) {
  const std::string dir = temp_dir("memory_refused"), run = dir + "/run";
  fs::create_directories(run);
  std::ofstream(run + "/train.log") << "the console of an earlier attempt\n";
  Recipe too_large = short_recipe();
  // 2^20 rows of 2048 tokens at once: terabytes of logits, more than any machine has.
  too_large.train.device_batch_size = int64_t{1} << 20;
  too_large.model.max_seq_len = 2048;
  too_large.train.horizon.total_batch_size = int64_t{1} << 31;
  const std::string train = std::string(nanoforge_binary()) + " train --recipe ";
  const ProgramRun refused = run_command(train + recipe_file(too_large, dir) + " --run-dir " + run + " 2>&1");
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("lower train.device_batch_size"), std::string::npos) << refused.output;
  const std::string table = "memory per rank on cpu";
  const size_t first = refused.output.find(table);
  EXPECT_NE(first, std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find(table, first + 1), std::string::npos) << "printed twice:\n" << refused.output;
  const ProgramRun retry =
      run_command(train + recipe_file(short_recipe(), dir) + " --run-dir " + run + " 2>&1");
  EXPECT_EQ(retry.exit_code, 0) << retry.output;
  EXPECT_EQ(losses_by_step(run).size(), 10u);
}

// A start that failed in its step-0 evaluation (after config.toml and metrics.jsonl were written) is
// replaced by the next start, which says so.
TEST(RunDirectory, AStartThatTrainedNoStepIsReplaced) {
  const std::string run = temp_dir("failed_start");
  Recipe recipe = short_recipe();
  recipe.train.eval_every = 5;
  recipe.data.val = bos_only_validation_shard();
  ASSERT_FALSE(run_training(recipe, stop_at(run, -1)).ok());
  ASSERT_TRUE(fs::exists(run + "/config.toml"));
  testing::internal::CaptureStdout();
  const absl::Status retry = run_training(short_recipe(), stop_at(run, -1));
  const std::string output = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(retry.ok()) << retry;
  EXPECT_NE(output.find("held only what a start that trained no step left (config.toml"), std::string::npos)
      << output;
  EXPECT_EQ(losses_by_step(run).size(), 10u);
}

// Issue 40: a --resume-from naming no directory was reported as a checkpoint without manifest.txt ("format
// 1 ... upgrade it"); it must say that it does not exist, and which checkpoints the run has.
TEST(RunDirectory, ResumeFromAMissingDirectorySaysSo) {
  const std::string run = temp_dir("resume_from_missing");
  ASSERT_TRUE(run_training(short_recipe(), stop_at(run, 5)).ok());
  TrainRunOptions options = stop_at(run, -1);
  options.resume_from = run + "/checkpoints/step_000010";
  const absl::Status status = run_training(short_recipe(), options);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("--resume-from " + options.resume_from + ": does not exist"),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("the checkpoints of " + run + " are step_000005"), std::string::npos)
      << status;
  EXPECT_EQ(status.message().find("manifest"), std::string::npos) << status;
}

// A requeued job passes --resume whether or not its first attempt wrote a checkpoint.
TEST(RunDirectory, ResumeWithoutACheckpointStartsFromStepZero) {
  const std::string run = temp_dir("resume_empty");
  ASSERT_TRUE(run_training(short_recipe(), resuming(run)).ok());
  EXPECT_EQ(fs::path(*latest_checkpoint(run)).filename(), "step_000010");
  EXPECT_EQ(losses_by_step(run).size(), 10u);
}

// The probe's --stop-at-step 0 and -5 were accepted; a stop at or before the resumed step trained nothing.
TEST(RunDirectory, StopAtStepMustBeAStepAfterTheStart) {
  for (const int64_t stop : {0, -5}) {
    const absl::Status status = run_training(short_recipe(), stop_at(temp_dir("stop_bad"), stop));
    EXPECT_NE(status.message().find(fmt::format("--stop-at-step {}: give a step >= 1", stop)),
              std::string::npos)
        << status;
  }
  const std::string run = temp_dir("stop_before");
  ASSERT_TRUE(run_training(short_recipe(), stop_at(run, 5)).ok());
  const absl::Status status = run_training(short_recipe(), resuming(run, 3));
  EXPECT_NE(status.message().find("--stop-at-step 3 is not after the step 5"), std::string::npos) << status;
}

// The probe's checkpoint beyond num_iterations printed "done" and trained nothing.
TEST(RunDirectory, ACheckpointBeyondTheHorizonIsRefused) {
  const std::string run = temp_dir("beyond");
  ASSERT_TRUE(run_training(short_recipe(), stop_at(run, -1)).ok());
  Recipe shorter = short_recipe();
  shorter.train.horizon.num_iterations = 8;
  const absl::Status status = run_training(shorter, resuming(run));
  EXPECT_NE(status.message().find("is at step 10, beyond the run's 8 steps (train.num_iterations)"),
            std::string::npos)
      << status;
}

// The probe trained on a directory holding only validation shards.
TEST(RunDirectory, ValidationShardsAreNotTrainingData) {
  const std::string data = temp_dir("val_only");
  for (const auto& entry : fs::directory_iterator(sentence_shards())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("val_", 0) == 0) fs::copy_file(entry.path(), data + "/" + name);
  }
  Recipe recipe = short_recipe();
  recipe.data.train = data;
  const absl::Status status = run_training(recipe, stop_at(temp_dir("val_only_run"), -1));
  EXPECT_NE(status.message().find("data.train: " + data + ": no train shards, only shards of another split"),
            std::string::npos)
      << status;
}

TEST(RunDirectory, AnEvaluationLargerThanTheValidationShardsIsRefused) {
  Recipe recipe = short_recipe();
  recipe.train.eval_every = 5;
  recipe.train.eval_tokens = int64_t{1} << 40;
  const absl::Status status = run_training(recipe, stop_at(temp_dir("eval_too_large"), -1));
  EXPECT_NE(status.message().find("train.eval_tokens 1099511627776 exceeds the"), std::string::npos)
      << status;
}

// The probe's train.threads = 100000 crashed (SIGSEGV) once the threads were started: refused first.
TEST(RunDirectory, TooManyThreadsAreRefusedBeforeAnyIsStarted) {
  Recipe recipe = short_recipe();
  recipe.train.threads = 100000;
  const absl::Status status = run_training(recipe, stop_at(temp_dir("threads"), -1));
  EXPECT_NE(status.message().find("train.threads must be in [0, 1024] (0: all cores), got 100000"),
            std::string::npos)
      << status;
}

// The probe's validation shard of one-token documents (BOS alone) gave val bpb inf: no target had a byte.
TEST(RunDirectory, ValidationRowsWithoutTextAreAnError) {
  Recipe recipe = short_recipe();
  recipe.data.val = bos_only_validation_shard();
  recipe.train.eval_every = 5;
  const absl::Status status = run_training(recipe, stop_at(temp_dir("bos_only_run"), -1));
  EXPECT_NE(status.message().find("hold no text bytes"), std::string::npos) << status;
}

}  // namespace
}  // namespace nanoforge
