// nanochat's CORE eval bundle as its base_eval.py reads it: DIR/core.yaml (the tasks: label, dataset_uri,
// num_fewshot, icl_task_type, continuation_delimiter), DIR/eval_meta_data.csv (each task's random baseline,
// in percent) and DIR/eval_data/<dataset_uri> (one JSON example per line). Everything is read and checked up
// front, so a missing file or a malformed example stops a run before any evaluation, naming the file, the
// task and the example.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge {

enum class CoreTaskType { kMultipleChoice, kSchema, kLanguageModeling };
// nanochat's names: multiple_choice, schema, language_modeling.
const char* core_task_type_name(CoreTaskType type);

// One example; the fields its task type uses are set (nanochat's item[...] keys).
struct CoreExample {
  std::string query;                         // multiple choice
  std::vector<std::string> choices;          // multiple choice
  std::vector<std::string> context_options;  // schema
  std::string context;                       // language modelling
  std::string continuation;                  // schema, language modelling
  int64_t gold = -1;                         // multiple choice, schema: the index of the right option
  int64_t line = 0;                          // its line in the task file (1-based), for messages
};

struct CoreTask {
  std::string label;
  std::string dataset_uri;  // under DIR/eval_data/
  CoreTaskType type = CoreTaskType::kMultipleChoice;
  int64_t num_fewshot = 0;                   // core.yaml's num_fewshot[0]
  std::string continuation_delimiter = " ";  // nanochat's default when core.yaml has none
  double random_baseline_percent = 0;        // eval_meta_data.csv's "Random baseline"
  std::vector<CoreExample> examples;         // in file order
};

struct CoreBundle {
  std::string dir;
  std::vector<CoreTask> tasks;  // in core.yaml's order

  static absl::StatusOr<CoreBundle> read(const std::string& dir);
  int64_t example_count() const;
};

}  // namespace nanoforge
