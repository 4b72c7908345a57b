// Reading the eval bundle (core.yaml, eval_meta_data.csv, the task files) and rendering prompts: the
// committed bundle reads as written, nanochat's templates give the strings below, and every kind of bad
// input stops with a message naming the file, the task and the example.
#include <gtest/gtest.h>

#include "eval/core/core_bundle.h"
#include "eval/core/core_prompts.h"
#include "tests/eval/core/core_test_support.h"

namespace nanoforge {
namespace {

using namespace test;

TEST(CoreBundle, ReadsTheCommittedBundle) {
  absl::StatusOr<CoreBundle> bundle = CoreBundle::read(kCoreBundle);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  ASSERT_EQ(bundle->tasks.size(), 7u);
  const CoreTask& ten_shot = bundle->tasks[1];
  EXPECT_EQ(ten_shot.label, "mc_tenshot");
  EXPECT_EQ(ten_shot.type, CoreTaskType::kMultipleChoice);
  EXPECT_EQ(ten_shot.num_fewshot, 10);
  EXPECT_EQ(ten_shot.continuation_delimiter, "\nAnswer: ");  // YAML's double-quoted escape
  EXPECT_EQ(ten_shot.random_baseline_percent, 25);
  EXPECT_EQ(bundle->tasks[0].continuation_delimiter, " ");  // nanochat's default
  EXPECT_EQ(bundle->tasks[2].continuation_delimiter, "");
  // The row after a quoted field with a comma and a line break inside it.
  EXPECT_EQ(bundle->tasks[2].random_baseline_percent, 33.33);
  EXPECT_EQ(bundle->tasks[3].type, CoreTaskType::kSchema);
  EXPECT_EQ(bundle->tasks[6].type, CoreTaskType::kLanguageModeling);
  EXPECT_EQ(bundle->tasks[6].examples.size(), 90u);
  EXPECT_EQ(bundle->example_count(), 148);
  EXPECT_EQ(bundle->tasks[2].examples[7].choices[2], " \u2014 the city");
  EXPECT_EQ(bundle->tasks[2].examples[7].line, 8);
}

TEST(CorePrompts, PythonStripRemovesUnicodeSpaces) {
  EXPECT_EQ(python_strip(" \t\nabc \u00a0\u3000\u2028"), "abc");
  EXPECT_EQ(python_strip("\u200babc"), "\u200babc");  // a zero-width space is not whitespace to Python
  EXPECT_EQ(python_strip("  "), "");
  EXPECT_EQ(python_strip("a b"), "a b");
}

TEST(CorePrompts, RenderNanochatsTemplates) {
  CoreTask task;
  task.continuation_delimiter = "\nA: ";
  CoreExample shot, item;
  shot.query = "Q1";
  shot.choices = {"x", "y"};
  shot.gold = 1;
  item.query = "Q2";
  item.choices = {"p", "q"};
  const std::vector<const CoreExample*> shots = {&shot, &shot};
  EXPECT_EQ(
      render_core_prompts(task, item, shots),
      (std::vector<std::string>{"Q1\nA: y\n\nQ1\nA: y\n\nQ2\nA: p", "Q1\nA: y\n\nQ1\nA: y\n\nQ2\nA: q"}));

  task.type = CoreTaskType::kSchema;
  task.continuation_delimiter = " ";
  shot.context_options = {"a", "b"};
  shot.continuation = "c.";
  item.context_options = {"d", "e"};
  item.continuation = "f.";
  EXPECT_EQ(render_core_prompts(task, item, std::vector<const CoreExample*>{&shot}),
            (std::vector<std::string>{"b c.\n\nd f.", "b c.\n\ne f."}));

  task.type = CoreTaskType::kLanguageModeling;
  shot.context = "  one two \n";
  shot.continuation = "three";
  item.context = "four five\u00a0";
  item.continuation = "six";
  // Contexts are trimmed; the prompt without the continuation is stripped again (the delimiter's space goes).
  EXPECT_EQ(render_core_prompts(task, item, std::vector<const CoreExample*>{&shot}),
            (std::vector<std::string>{"one two three\n\nfour five", "one two three\n\nfour five six"}));
  EXPECT_EQ(render_core_prompts(task, item, {}), (std::vector<std::string>{"four five", "four five six"}));
}

absl::Status read_status(const std::string& dir) {
  return CoreBundle::read(dir).status();
}

TEST(CoreBundle, MissingFilesNameWhatIsMissing) {
  const std::string dir = bundle_copy("missing");
  std::filesystem::remove(dir + "/eval_data/world_knowledge/mc_tenshot.jsonl");
  absl::Status status = read_status(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_PRED2(contains, std::string(status.message()),
               "mc_tenshot.jsonl: cannot read task mc_tenshot's examples");
  std::filesystem::remove(dir + "/eval_meta_data.csv");
  EXPECT_PRED2(contains, std::string(read_status(dir).message()),
               "eval_meta_data.csv: cannot read the random baselines");
  std::filesystem::remove(dir + "/core.yaml");
  EXPECT_PRED2(contains, std::string(read_status(dir).message()),
               "core.yaml: cannot read the CORE task list");
}

TEST(CoreBundle, MalformedExamplesNameTheTaskAndLine) {
  const std::string dir = bundle_copy("malformed");
  const std::string file = dir + "/eval_data/commonsense_reasoning/schema_zeroshot.jsonl";
  const std::string good = read_text(file);
  const auto expect_error = [&](const std::string& third_line, const std::string& message) {
    const size_t second_end = good.find('\n', good.find('\n') + 1);
    write_text(file, good.substr(0, second_end + 1) + third_line + "\n" + good.substr(second_end + 1));
    const absl::Status status = read_status(dir);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << third_line;
    EXPECT_PRED2(contains, std::string(status.message()),
                 "schema_zeroshot.jsonl:3: task schema_zeroshot, example on line 3");
    EXPECT_PRED2(contains, std::string(status.message()), message);
  };
  expect_error("{\"context_options\": [\"a\", \"b\"], \"continuation\": \"c\"", "not valid JSON");
  expect_error("", "empty line");
  expect_error("[1, 2]", "expected a JSON object");
  expect_error("{\"context_options\": [\"a\", \"b\"], \"continuation\": \"c\", \"gold\": 2}",
               "\"gold\" must be the index of one of the 2 options (0..1)");
  expect_error("{\"context_options\": [\"a\", \"b\"], \"gold\": 0}",
               "no \"continuation\" field (a schema example)");
  expect_error("{\"context_options\": \"a\", \"continuation\": \"c\", \"gold\": 0}",
               "\"context_options\" must be a list of strings");
  expect_error("{\"context_options\": [\"a\", 7], \"continuation\": \"c\", \"gold\": 0}",
               "\"context_options\" must be a list of strings");
}

TEST(CoreBundle, BadTaskListAndBaselinesAreNamed) {
  const std::string dir = bundle_copy("config");
  const std::string yaml = read_text(dir + "/core.yaml");
  const auto with_yaml = [&](const std::string& from, const std::string& to) {
    std::string text = yaml;
    text.replace(text.find(from), from.size(), to);
    write_text(dir + "/core.yaml", text);
    return read_status(dir);
  };
  EXPECT_PRED2(contains, std::string(with_yaml("num_fewshot: [10]", "num_fewshot: 10").message()),
               "icl_tasks entry 2: task mc_tenshot: num_fewshot must be a list");
  EXPECT_PRED2(contains,
               std::string(with_yaml("icl_task_type: schema", "icl_task_type: generation_task").message()),
               "task schema_zeroshot: icl_task_type 'generation_task' is not one nanochat evaluates");
  EXPECT_PRED2(contains, std::string(with_yaml("icl_tasks:", "tasks:").message()),
               "needs a non-empty list icl_tasks");
  EXPECT_PRED2(contains, std::string(with_yaml("  label: lm_zeroshot", "  label: lm_unknown").message()),
               "eval_meta_data.csv: no row for task lm_unknown");
  EXPECT_PRED2(contains, std::string(with_yaml("icl_tasks:", "icl_tasks: [").message()),
               "core.yaml: not valid YAML");
  // Fuzzing found it (core_bundle): a core.yaml that is one scalar made yaml-cpp throw BadSubscript out of
  // the reader (an abort). Reproducer: tests/fuzz/corpus/core_bundle/regress_scalar_document.
  for (const char* document : {"icl_tasks", "- icl_tasks\n- label\n"}) {
    write_text(dir + "/core.yaml", document);
    const absl::Status status = read_status(dir);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << document;
    EXPECT_PRED2(contains, std::string(status.message()), "core.yaml: needs a non-empty list icl_tasks");
  }
  write_text(dir + "/core.yaml", yaml);
  const std::string csv = read_text(dir + "/eval_meta_data.csv");
  write_text(dir + "/eval_meta_data.csv", csv.substr(0, csv.find('\n')) + "\nlm_zeroshot,x,y,0,10,zero,,\n");
  EXPECT_PRED2(contains, std::string(read_status(dir).message()), "no row for task mc_zeroshot");
  std::string bad_baseline = csv;
  bad_baseline.replace(bad_baseline.find("10,0,,Last"), 10, "10,none,,Last");
  write_text(dir + "/eval_meta_data.csv", bad_baseline);
  EXPECT_PRED2(contains, std::string(read_status(dir).message()),
               "task lm_zeroshot's 'Random baseline' is 'none'");
  write_text(dir + "/eval_meta_data.csv", "Task,Baseline\nmc_zeroshot,25\n");
  EXPECT_PRED2(contains, std::string(read_status(dir).message()),
               "needs the columns 'Eval Task' and 'Random baseline'");
}

}  // namespace
}  // namespace nanoforge
