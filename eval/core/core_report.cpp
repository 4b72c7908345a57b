// Progress line, table and JSON of CORE results.
#include "eval/core/core_report.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "support/json_text.h"
#include "support/output_path.h"

namespace nanoforge {
namespace {

// A float as Python's json.dumps writes it: the shortest repr, NaN and Infinity spelled out.
std::string python_float(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

template <class Value>
std::string json_object(const CoreResults& results, Value value) {
  std::string text = "{";
  for (const CoreTaskResult& task : results.tasks)
    text += fmt::format("{}{}: {}", text.size() > 1 ? ", " : "", json_string(task.label), value(task));
  return text + "}";
}

}  // namespace

std::string core_task_line(const CoreTaskResult& task) {
  return fmt::format("{} ({}-shot, type: {}): accuracy: {:.4f} | centered: {:.4f} | {} examples, {:.2f}s",
                     task.label, task.num_fewshot, core_task_type_name(task.type), task.accuracy,
                     task.centered, task.correct.size(), task.seconds);
}

std::string core_table(const CoreResults& results) {
  std::string text = fmt::format("{:<35}, {:<10}, {:<10}\n", "Task", "Accuracy", "Centered");
  for (const CoreTaskResult& task : results.tasks)
    text += fmt::format("{:<35}, {:<10.6f}, {:<10.6f}\n", task.label, task.accuracy, task.centered);
  return text + fmt::format("{:<35}, {:<10}, {:<10.6f}\n", "CORE", "", results.core_metric);
}

std::string core_json(const CoreResults& results) {
  return fmt::format(
      "{{\"results\": {}, \"centered_results\": {}, \"core_metric\": {}}}",
      json_object(results, [](const CoreTaskResult& task) { return python_float(task.accuracy); }),
      json_object(results, [](const CoreTaskResult& task) { return python_float(task.centered); }),
      python_float(results.core_metric));
}

absl::Status write_core_file(const std::string& path, const CoreResults& results, const CoreRunInfo& info) {
  const std::string record = core_json(results);
  std::string text = record.substr(0, record.size() - 1);  // without the closing brace
  text += fmt::format(
      ", \"checkpoint\": {}, \"step\": {}, \"bundle\": {}, \"max_per_task\": {}, \"device\": {}, "
      "\"world_size\": {}, \"examples\": {}, \"seconds\": {}, \"correct\": {}}}\n",
      json_string(info.checkpoint), info.step, json_string(info.bundle), info.max_per_task,
      json_string(info.device), info.world_size, results.examples, python_float(results.seconds),
      json_object(results, [](const CoreTaskResult& task) {
        std::string list = "[";
        for (const uint8_t correct : task.correct)
          list += fmt::format("{}{}", list.size() > 1 ? ", " : "", correct);
        return list + "]";
      }));
  return write_file_atomically(path, text);
}

}  // namespace nanoforge
