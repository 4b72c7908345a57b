// `nanoforge eval --core` as a user runs it: on the committed bundle and checkpoint its closing JSON record
// and its results file equal nanochat's golden run for run; 2 ranks under mpirun give one rank's results;
// a prompt longer than the model or a continuation that is not a token prefix stop every rank with a
// message naming the task and the example; too few examples for the shots, or a prompt longer than the
// model, stop it before any task is scored.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdlib>

#include "tests/eval/core/core_test_support.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace nanoforge {
namespace {

using namespace test;

std::string scratch(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("nanoforge_core_cli_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// `nanoforge eval --core` with one CPU thread per rank (ctest runs tests side by side); stderr included.
ProgramRun eval_core(const std::string& bundle, const std::string& out, const std::string& extra = "",
                     int ranks = 1) {
  // Open MPI refuses to start as root (CI containers) without these; --oversubscribe: CI has 2 cores.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string launcher =
      ranks > 1 ? fmt::format("{} -n {} --oversubscribe ", test::mpiexec(), ranks) : std::string();
  return run_command(
      fmt::format("{}{} eval --core {} --checkpoint {} --tokenizer {} --out {} --threads 1 {} 2>&1", launcher,
                  test::nanoforge_binary(), bundle, kCoreCheckpoint, kCoreTokenizer, out, extra));
}

// The golden run for a --max-per-task value.
simdjson::dom::element golden_run(simdjson::dom::parser& parser, int64_t max_per_task) {
  simdjson::dom::element root;
  EXPECT_FALSE(parser.load(kCoreGolden).get(root));
  for (simdjson::dom::element run : root["runs"].get_array()) {
    if (int64_t(run["max_per_task"].get_int64()) == max_per_task) return run;
  }
  ADD_FAILURE() << "no golden run for max_per_task " << max_per_task;
  return root;
}

// The record's numbers and, when `file` is set, its per-example verdicts, against the golden run.
void expect_nanochat_results(const std::string& record_json, int64_t max_per_task, bool file) {
  simdjson::dom::parser golden_parser, parser;
  const simdjson::dom::element golden = golden_run(golden_parser, max_per_task);
  // The closing line is nanochat's record as Python's json.dumps writes it, character for character.
  if (!file) {
    EXPECT_EQ(record_json, std::string_view(golden["record"].get_string()));
  }
  simdjson::dom::element record;
  ASSERT_FALSE(parser.parse(record_json).get(record)) << record_json;
  for (const char* key : {"results", "centered_results"}) {
    size_t tasks = 0;
    for (auto [label, value] : golden[key].get_object()) {
      EXPECT_DOUBLE_EQ(double(record[key][label].get_double()), double(value.get_double()))
          << key << " " << label;
      ++tasks;
    }
    EXPECT_EQ(simdjson::dom::object(record[key]).size(), tasks);
  }
  EXPECT_DOUBLE_EQ(double(record["core_metric"].get_double()), double(golden["core_metric"].get_double()));
  if (!file) return;
  for (simdjson::dom::element task : golden["tasks"].get_array()) {
    const std::string_view label = task["label"].get_string();
    std::vector<int64_t> expected, got;
    for (simdjson::dom::element example : task["examples"].get_array())
      expected.push_back(bool(example["correct"].get_bool()) ? 1 : 0);
    for (simdjson::dom::element verdict : record["correct"][label].get_array())
      got.push_back(int64_t(verdict.get_int64()));
    EXPECT_EQ(got, expected) << label;
  }
}

TEST(CoreCli, OneRankGivesNanochatsResults) {
  const std::string out = scratch("one.json");
  const ProgramRun run = eval_core(kCoreBundle, out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_PRED2(contains, std::string(run.output), "lm_tenshot (10-shot, type: language_modeling): accuracy:");
  EXPECT_PRED2(contains, std::string(run.output),
               "Task                               , Accuracy  , Centered");
  expect_nanochat_results(last_line(run.output), -1, /*file=*/false);
  expect_nanochat_results(read_text(out), -1, /*file=*/true);
}

TEST(CoreCli, MaxPerTaskCutsAfterNanochatsShuffle) {
  const std::string out = scratch("cut.json");
  const ProgramRun run = eval_core(kCoreBundle, out, "--max-per-task 12");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_nanochat_results(read_text(out), 12, /*file=*/true);
}

TEST(CoreCli, TwoRanksGiveOneRanksResults) {
  const std::string one = scratch("rank_one.json"), two = scratch("rank_two.json");
  const ProgramRun single = eval_core(kCoreBundle, one);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const ProgramRun pair = eval_core(kCoreBundle, two, "", 2);
  ASSERT_EQ(pair.exit_code, 0) << pair.output;
  EXPECT_EQ(last_line(pair.output), last_line(single.output));
  EXPECT_PRED2(contains, std::string(pair.output), "2 ranks on cpu");
  expect_nanochat_results(read_text(two), -1, /*file=*/true);
}

// Appends one language-modelling example to lm_zeroshot (line 11 of its file).
std::string bundle_with_lm_example(const std::string& name, const std::string& context,
                                   const std::string& continuation) {
  const std::string dir = bundle_copy(name);
  const std::string file = dir + "/eval_data/language_understanding/lm_zeroshot.jsonl";
  write_text(file, read_text(file) + fmt::format("{{\"context\": \"{}\", \"continuation\": \"{}\"}}\n",
                                                 context, continuation));
  return dir;
}

TEST(CoreCli, PromptLongerThanTheModelNamesTheExampleOnEveryRank) {
  std::string context;
  for (int i = 0; i < 400; ++i)
    context += "And it came to pass ";  // ~2,000 tokens: past the committed model's 10 x 64 positions
  const std::string dir = bundle_with_lm_example("long", context, "end");
  for (const int ranks : {1, 2}) {
    const ProgramRun run = eval_core(dir, scratch("long.json"), "", ranks);
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_PRED2(contains, std::string(run.output),
                 "task lm_zeroshot, example on line 11 of language_understanding/"
                 "lm_zeroshot.jsonl: its 0-shot prompt is");
    EXPECT_PRED2(contains, std::string(run.output), "more than the 640 positions the model can read");
    // Checked before any task is scored: the five tasks before lm_zeroshot print nothing.
    EXPECT_EQ(run.output.find("accuracy:"), std::string::npos) << run.output;
  }
}

TEST(CoreCli, ContinuationThatIsNotATokenPrefixIsAnError) {
  // A task with an empty delimiter: "And God said" + ", Let there be light" keeps its token prefix; "and the"
  // + "re" does not (" the" and " there" are different tokens).
  const std::string dir = bundle_copy("prefix");
  write_text(dir + "/core.yaml",
             read_text(dir + "/core.yaml") +
                 "-\n  label: lm_joined\n  dataset_uri: lm_joined.jsonl\n  num_fewshot: [0]\n"
                 "  icl_task_type: language_modeling\n  continuation_delimiter: \"\"\n");
  write_text(dir + "/eval_meta_data.csv",
             read_text(dir + "/eval_meta_data.csv") + "lm_joined,x,y,0,2,0,,z\n");
  write_text(dir + "/eval_data/lm_joined.jsonl",
             "{\"context\": \"And God said\", \"continuation\": \", Let there be light\"}\n"
             "{\"context\": \"and the\", \"continuation\": \"re\"}\n");
  const ProgramRun run = eval_core(dir, scratch("prefix.json"));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_PRED2(contains, run.output,
               "task lm_joined, example on line 2 of lm_joined.jsonl: the prompt without the "
               "continuation does not tokenize to a proper prefix");
}

// Every task is checked against --max-per-task before the model is loaded: the error lists each task that
// cannot run and the smallest value that works, and no task is scored (mc_zeroshot, the first, could be).
TEST(CoreCli, TooFewExamplesForTheShotsStopsBeforeAnyTaskIsScored) {
  const ProgramRun run = eval_core(kCoreBundle, scratch("few.json"), "--max-per-task 4");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_PRED2(
      contains, std::string(run.output),
      "--max-per-task 4 is too few for 3 tasks of " + std::string(kCoreBundle) +
          ": mc_tenshot (10 shots need at least 11 examples, the cut keeps 4), schema_fewshot (5 shots "
          "need at least 6 examples, the cut keeps 4), lm_tenshot (10 shots need at least 11 examples, "
          "the cut keeps 4); give --max-per-task 11 or more, or -1 (all examples)");
  EXPECT_EQ(run.output.find("accuracy:"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("CORE of"), std::string::npos) << run.output;  // the model was not loaded
}

// A task whose file holds no more examples than its shots cannot run under any --max-per-task.
TEST(CoreCli, ATaskWithTooFewExamplesForItsShotsIsNamedBeforeScoring) {
  const std::string dir = bundle_copy("short_task");
  const std::string file = dir + "/eval_data/world_knowledge/mc_tenshot.jsonl";
  const std::string text = read_text(file);
  size_t end = 0;
  for (int line = 0; line < 10; ++line)
    end = text.find('\n', end) + 1;
  write_text(file, text.substr(0, end));  // 10 examples for 10 shots
  const ProgramRun run = eval_core(dir, scratch("short.json"));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_PRED2(contains, std::string(run.output),
               "1 task cannot run with any --max-per-task: mc_tenshot (10 shots need at least 11 examples; "
               "eval_data/world_knowledge/mc_tenshot.jsonl has 10)");
  EXPECT_EQ(run.output.find("accuracy:"), std::string::npos) << run.output;
}

// The results file may not replace one of the checkpoint's own files; refused before evaluating.
TEST(CoreCli, ResultsNeverReplaceACheckpointFile) {
  const std::string checkpoint = scratch("checkpoint_copy");
  std::filesystem::remove_all(checkpoint);
  std::filesystem::copy(kCoreCheckpoint, checkpoint, std::filesystem::copy_options::recursive);
  const std::string model = checkpoint + "/model.h5";
  const auto size_before = std::filesystem::file_size(model);
  const ProgramRun run =
      run_command(fmt::format("{} eval --core {} --checkpoint {} --tokenizer {} --out {} 2>&1",
                              test::nanoforge_binary(), kCoreBundle, checkpoint, kCoreTokenizer, model));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_PRED2(contains, std::string(run.output), "would replace model.h5 of checkpoint");
  EXPECT_EQ(run.output.find("CORE of"), std::string::npos) << run.output;  // nothing evaluated
  EXPECT_EQ(std::filesystem::file_size(model), size_before);
}

TEST(CoreCli, MissingBundleIsNamed) {
  const ProgramRun run = eval_core(scratch("no_bundle"), scratch("none.json"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_PRED2(contains, std::string(run.output), "no_bundle/core.yaml: cannot read the CORE task list");
}

}  // namespace
}  // namespace nanoforge
