// render_core_prompts: core_eval.py's render_prompts_mc / _schema / _lm. Their templates are whitespace-
// controlled ({%- -%}) so that only "\n\n" after each shot survives; the strings below are what they render.
#include "eval/core/core_prompts.h"

#include <cstdint>

namespace nanoforge {
namespace {

// Python's str.isspace() code points.
bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

// The code point starting at text[at] and its length in bytes (invalid UTF-8: the byte itself, length 1).
std::pair<uint32_t, size_t> code_point_at(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text[i])); };
  const uint32_t first = byte(at);
  const size_t length = first < 0x80           ? 1
                        : (first >> 5) == 0x6  ? 2
                        : (first >> 4) == 0xe  ? 3
                        : (first >> 3) == 0x1e ? 4
                                               : 1;
  if (length == 1 || at + length > text.size()) return {first, 1};
  uint32_t value = first & (0x7f >> length);
  for (size_t i = 1; i < length; ++i)
    value = (value << 6) | (byte(at + i) & 0x3f);
  return {value, length};
}

// The start of the code point that ends just before text[end].
size_t previous_code_point(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80)
    --start;
  return start;
}

std::string shot_text(const CoreTask& task, const CoreExample& shot) {
  switch (task.type) {
    case CoreTaskType::kMultipleChoice:
      return shot.query + task.continuation_delimiter + shot.choices[static_cast<size_t>(shot.gold)] + "\n\n";
    case CoreTaskType::kSchema:
      return shot.context_options[static_cast<size_t>(shot.gold)] + task.continuation_delimiter +
             shot.continuation + "\n\n";
    case CoreTaskType::kLanguageModeling:
      return std::string(python_strip(shot.context)) + task.continuation_delimiter + shot.continuation +
             "\n\n";
  }
  return "";
}

}  // namespace

std::string_view python_strip(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    const auto [code, length] = code_point_at(text, begin);
    if (!is_python_space(code)) break;
    begin += length;
  }
  while (end > begin) {
    const size_t start = previous_code_point(text, end);
    if (!is_python_space(code_point_at(text, start).first)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::vector<std::string> render_core_prompts(const CoreTask& task, const CoreExample& example,
                                             std::span<const CoreExample* const> shots) {
  std::string shots_text;
  for (const CoreExample* shot : shots)
    shots_text += shot_text(task, *shot);
  const std::string& delimiter = task.continuation_delimiter;
  std::vector<std::string> prompts;
  switch (task.type) {
    case CoreTaskType::kMultipleChoice:
      for (const std::string& choice : example.choices)
        prompts.push_back(shots_text + example.query + delimiter + choice);
      break;
    case CoreTaskType::kSchema:
      for (const std::string& option : example.context_options)
        prompts.push_back(shots_text + option + delimiter + example.continuation);
      break;
    case CoreTaskType::kLanguageModeling: {
      const std::string without = shots_text + std::string(python_strip(example.context)) + delimiter;
      prompts.push_back(std::string(python_strip(without)));
      prompts.push_back(without + example.continuation);
      break;
    }
  }
  return prompts;
}

}  // namespace nanoforge
