// The few-shot prompts of nanochat's core_eval.py, character for character: its Jinja templates rendered by
// hand. Each shot is "<shot text><delimiter><shot answer>\n\n", then the example itself:
//   multiple choice:   query + delimiter + choice, one prompt per choice (shots answer with their gold
//   choice); schema:            context option + delimiter + continuation, one per option (shots use their
//   gold option); language modelling: trimmed context + delimiter, without and with the continuation — the
//   first stripped
//                      of surrounding whitespace (Python's str.strip, so Unicode spaces too), as nanochat
//                      does.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/core/core_bundle.h"

namespace nanoforge {

// Python's str.strip(): removes leading and trailing code points for which str.isspace() is true (UTF-8).
std::string_view python_strip(std::string_view text);

// The prompts of one example given its shots (in drawing order).
std::vector<std::string> render_core_prompts(const CoreTask& task, const CoreExample& example,
                                             std::span<const CoreExample* const> shots);

}  // namespace nanoforge
