// CoreBundle::read: core.yaml with yaml-cpp, eval_meta_data.csv with libcsv (RFC 4180: quoted fields may hold
// commas and newlines, as Python's csv module reads them), the task files with simdjson.
#include "eval/core/core_bundle.h"

#include <csv.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include "support/status.h"

namespace nanoforge {
namespace {

absl::StatusOr<std::string> read_file(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(fmt::format("{}: cannot read {} (no such file?)", path, what));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// ---- core.yaml ----

absl::StatusOr<CoreTaskType> parse_task_type(const std::string& name) {
  if (name == "multiple_choice") return CoreTaskType::kMultipleChoice;
  if (name == "schema") return CoreTaskType::kSchema;
  if (name == "language_modeling") return CoreTaskType::kLanguageModeling;
  return absl::InvalidArgumentError(fmt::format(
      "icl_task_type '{}' is not one nanochat evaluates (multiple_choice, schema, language_modeling)", name));
}

absl::StatusOr<std::string> scalar_text(const YAML::Node& task, const char* key) {
  const YAML::Node node = task[key];
  if (!node.IsDefined() || node.IsNull())
    return absl::InvalidArgumentError(fmt::format("{} is missing", key));
  if (!node.IsScalar()) return absl::InvalidArgumentError(fmt::format("{} must be a string", key));
  return node.Scalar();
}

absl::StatusOr<CoreTask> parse_task(const YAML::Node& node) {
  if (!node.IsMap()) return absl::InvalidArgumentError("each entry of icl_tasks must be a mapping");
  CoreTask task;
  NANOFORGE_ASSIGN_OR_RETURN(task.label, scalar_text(node, "label"));
  auto in_task = [&](const absl::Status& status) {
    return absl::InvalidArgumentError(fmt::format("task {}: {}", task.label, std::string(status.message())));
  };
  absl::StatusOr<std::string> uri = scalar_text(node, "dataset_uri");
  if (!uri.ok()) return in_task(uri.status());
  task.dataset_uri = *uri;
  absl::StatusOr<std::string> type_name = scalar_text(node, "icl_task_type");
  if (!type_name.ok()) return in_task(type_name.status());
  absl::StatusOr<CoreTaskType> type = parse_task_type(*type_name);
  if (!type.ok()) return in_task(type.status());
  task.type = *type;
  const YAML::Node shots = node["num_fewshot"];
  int64_t num_fewshot = -1;
  if (shots.IsSequence() && shots.size() > 0 && shots[0].IsScalar()) {
    const std::string text = shots[0].Scalar();
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), num_fewshot);
    if (error != std::errc() || end != text.data() + text.size()) num_fewshot = -1;
  }
  if (num_fewshot < 0) {
    return in_task(absl::InvalidArgumentError(
        "num_fewshot must be a list whose first element is the number of shots, e.g. [10]"));
  }
  task.num_fewshot = num_fewshot;
  if (node["continuation_delimiter"].IsDefined()) {
    absl::StatusOr<std::string> delimiter = scalar_text(node, "continuation_delimiter");
    if (!delimiter.ok()) return in_task(delimiter.status());
    task.continuation_delimiter = *delimiter;
  }
  return task;
}

absl::StatusOr<std::vector<CoreTask>> read_tasks(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return absl::NotFoundError(fmt::format("{}: cannot read the CORE task list (no such file?)", path));
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(fmt::format("{}: not valid YAML: {}", path, error.what()));
  }
  // A document that is not a mapping (a scalar, a list) cannot be subscripted: yaml-cpp would throw.
  const YAML::Node list = root.IsMap() ? root["icl_tasks"] : YAML::Node();
  if (!list.IsSequence() || list.size() == 0) {
    return absl::InvalidArgumentError(fmt::format("{}: needs a non-empty list icl_tasks", path));
  }
  std::vector<CoreTask> tasks;
  for (const YAML::Node& node : list) {
    absl::StatusOr<CoreTask> task;
    try {
      task = parse_task(node);
    } catch (const YAML::Exception& error) {
      task = absl::InvalidArgumentError(error.what());
    }
    if (!task.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: icl_tasks entry {}: {}", path, tasks.size() + 1,
                                                    std::string(task.status().message())));
    }
    tasks.push_back(std::move(*task));
  }
  return tasks;
}

// ---- eval_meta_data.csv ----

struct CsvRows {
  std::vector<std::vector<std::string>> rows{{}};
  static void on_field(void* data, size_t length, void* rows) {
    static_cast<CsvRows*>(rows)->rows.back().emplace_back(static_cast<const char*>(data), length);
  }
  static void on_row_end(int, void* rows) { static_cast<CsvRows*>(rows)->rows.emplace_back(); }
};

int no_space_trimming(unsigned char) {
  return 0;  // Python's csv module keeps spaces around unquoted fields; libcsv trims them by default
}

absl::StatusOr<std::vector<std::vector<std::string>>> parse_csv(const std::string& text,
                                                                const std::string& path) {
  csv_parser parser;
  if (csv_init(&parser, 0) != 0) return absl::ResourceExhaustedError("libcsv: cannot initialise");
  csv_set_space_func(&parser, no_space_trimming);
  CsvRows rows;
  const size_t parsed =
      csv_parse(&parser, text.data(), text.size(), CsvRows::on_field, CsvRows::on_row_end, &rows);
  const bool ok =
      parsed == text.size() && csv_fini(&parser, CsvRows::on_field, CsvRows::on_row_end, &rows) == 0;
  const int error = csv_error(&parser);
  csv_free(&parser);
  if (!ok) return absl::InvalidArgumentError(fmt::format("{}: not valid CSV: {}", path, csv_strerror(error)));
  if (rows.rows.back().empty()) rows.rows.pop_back();
  return std::move(rows.rows);
}

// Python's float(): surrounding whitespace and a leading '+' are allowed.
bool parse_python_float(std::string text, double& value) {
  const size_t first = text.find_first_not_of(" \t\r\n\f\v"), last = text.find_last_not_of(" \t\r\n\f\v");
  if (first == std::string::npos) return false;
  text = text.substr(first, last - first + 1);
  if (text[0] == '+') text.erase(0, 1);
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

// Random baseline (percent) by task name; a later row for the same task wins, as in base_eval's dict.
absl::StatusOr<std::map<std::string, std::string>> read_baselines(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::string text, read_file(path, "the random baselines"));
  NANOFORGE_ASSIGN_OR_RETURN(const auto rows, parse_csv(text, path));
  if (rows.empty()) return absl::InvalidArgumentError(fmt::format("{}: empty; needs a header row", path));
  const std::vector<std::string>& header = rows[0];
  const auto column = [&](const char* name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t task_column = column("Eval Task"), baseline_column = column("Random baseline");
  if (task_column == header.size() || baseline_column == header.size()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: the header needs the columns 'Eval Task' and 'Random baseline'", path));
  }
  std::map<std::string, std::string> baselines;
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() <= std::max(task_column, baseline_column)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: row {} has {} fields, fewer than the header", path, r + 1, rows[r].size()));
    }
    baselines[rows[r][task_column]] = rows[r][baseline_column];
  }
  return baselines;
}

// ---- task files ----

absl::StatusOr<std::string> string_field(simdjson::dom::object& object, const char* key) {
  std::string_view value;
  const simdjson::error_code error = object[key].get(value);
  if (error == simdjson::NO_SUCH_FIELD)
    return absl::InvalidArgumentError(fmt::format("no \"{}\" field", key));
  if (error) return absl::InvalidArgumentError(fmt::format("\"{}\" must be a string", key));
  return std::string(value);
}

absl::StatusOr<std::vector<std::string>> strings_field(simdjson::dom::object& object, const char* key) {
  simdjson::dom::array array;
  const simdjson::error_code error = object[key].get(array);
  if (error == simdjson::NO_SUCH_FIELD)
    return absl::InvalidArgumentError(fmt::format("no \"{}\" field", key));
  if (error) return absl::InvalidArgumentError(fmt::format("\"{}\" must be a list of strings", key));
  std::vector<std::string> values;
  for (simdjson::dom::element element : array) {
    std::string_view value;
    if (element.get(value))
      return absl::InvalidArgumentError(fmt::format("\"{}\" must be a list of strings", key));
    values.emplace_back(value);
  }
  if (values.empty()) return absl::InvalidArgumentError(fmt::format("\"{}\" is empty", key));
  return values;
}

absl::StatusOr<int64_t> gold_field(simdjson::dom::object& object, size_t options) {
  int64_t gold = -1;
  const simdjson::error_code error = object["gold"].get(gold);
  if (error == simdjson::NO_SUCH_FIELD) return absl::InvalidArgumentError("no \"gold\" field");
  if (error || gold < 0 || static_cast<size_t>(gold) >= options) {
    return absl::InvalidArgumentError(
        fmt::format("\"gold\" must be the index of one of the {} options (0..{})", options, options - 1));
  }
  return gold;
}

absl::StatusOr<CoreExample> parse_example(simdjson::dom::object& object, CoreTaskType type) {
  CoreExample example;
  switch (type) {
    case CoreTaskType::kMultipleChoice: {
      NANOFORGE_ASSIGN_OR_RETURN(example.query, string_field(object, "query"));
      NANOFORGE_ASSIGN_OR_RETURN(example.choices, strings_field(object, "choices"));
      NANOFORGE_ASSIGN_OR_RETURN(example.gold, gold_field(object, example.choices.size()));
      break;
    }
    case CoreTaskType::kSchema: {
      NANOFORGE_ASSIGN_OR_RETURN(example.context_options, strings_field(object, "context_options"));
      NANOFORGE_ASSIGN_OR_RETURN(example.continuation, string_field(object, "continuation"));
      NANOFORGE_ASSIGN_OR_RETURN(example.gold, gold_field(object, example.context_options.size()));
      break;
    }
    case CoreTaskType::kLanguageModeling: {
      NANOFORGE_ASSIGN_OR_RETURN(example.context, string_field(object, "context"));
      NANOFORGE_ASSIGN_OR_RETURN(example.continuation, string_field(object, "continuation"));
      break;
    }
  }
  return example;
}

// One example per line, as base_eval's `json.loads(line.strip()) for line in f`: a blank line is an error.
absl::Status read_examples(const std::string& path, CoreTask& task) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::string text,
                             read_file(path, fmt::format("task {}'s examples", task.label)));
  simdjson::dom::parser parser;
  int64_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);  // Python's universal newlines
    ++line_number;
    auto malformed = [&](std::string_view why) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: task {}, example on line {}: {}", path,
                                                    line_number, task.label, line_number, why));
    };
    simdjson::dom::element root;
    if (const simdjson::error_code error = parser.parse(line.data(), line.size(), true).get(root); error) {
      return malformed(line.find_first_not_of(" \t") == std::string_view::npos
                           ? std::string("empty line (each line must be one JSON example)")
                           : fmt::format("not valid JSON: {}", simdjson::error_message(error)));
    }
    simdjson::dom::object object;
    if (root.get(object)) return malformed("expected a JSON object");
    absl::StatusOr<CoreExample> example = parse_example(object, task.type);
    if (!example.ok()) {
      return malformed(fmt::format("{} (a {} example)", std::string(example.status().message()),
                                   core_task_type_name(task.type)));
    }
    example->line = line_number;
    task.examples.push_back(std::move(*example));
  }
  return absl::OkStatus();
}

}  // namespace

const char* core_task_type_name(CoreTaskType type) {
  switch (type) {
    case CoreTaskType::kMultipleChoice:
      return "multiple_choice";
    case CoreTaskType::kSchema:
      return "schema";
    case CoreTaskType::kLanguageModeling:
      return "language_modeling";
  }
  return "?";
}

absl::StatusOr<CoreBundle> CoreBundle::read(const std::string& dir) {
  CoreBundle bundle{dir, {}};
  NANOFORGE_ASSIGN_OR_RETURN(bundle.tasks, read_tasks(dir + "/core.yaml"));
  const std::string baselines_path = dir + "/eval_meta_data.csv";
  NANOFORGE_ASSIGN_OR_RETURN(const auto baselines, read_baselines(baselines_path));
  for (CoreTask& task : bundle.tasks) {
    const auto baseline = baselines.find(task.label);
    if (baseline == baselines.end()) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: no row for task {} (its 'Eval Task' column must name it)", baselines_path, task.label));
    }
    if (!parse_python_float(baseline->second, task.random_baseline_percent) ||
        task.random_baseline_percent >= 100) {
      return absl::InvalidArgumentError(
          fmt::format("{}: task {}'s 'Random baseline' is '{}'; it must be a number below 100 (percent)",
                      baselines_path, task.label, baseline->second));
    }
    NANOFORGE_RETURN_IF_ERROR(read_examples(dir + "/eval_data/" + task.dataset_uri, task));
  }
  return bundle;
}

int64_t CoreBundle::example_count() const {
  int64_t count = 0;
  for (const CoreTask& task : tasks)
    count += static_cast<int64_t>(task.examples.size());
  return count;
}

}  // namespace nanoforge
