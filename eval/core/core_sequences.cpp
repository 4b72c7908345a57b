// core_sequences: core_eval.py's find_common_length and batch_sequences_mc / _schema / _lm.
#include "eval/core/core_sequences.h"

#include <algorithm>

namespace nanoforge {
namespace {

// The length of the prefix (from_end false) or suffix (true) all rows share.
int64_t common_length(const std::vector<std::vector<int32_t>>& rows, bool from_end) {
  size_t shortest = rows[0].size();
  for (const std::vector<int32_t>& row : rows)
    shortest = std::min(shortest, row.size());
  for (size_t i = 0; i < shortest; ++i) {
    const auto at = [&](const std::vector<int32_t>& row) {
      return from_end ? row[row.size() - 1 - i] : row[i];
    };
    const int32_t token = at(rows[0]);
    for (const std::vector<int32_t>& row : rows) {
      if (at(row) != token) return static_cast<int64_t>(i);
    }
  }
  return static_cast<int64_t>(shortest);
}

}  // namespace

absl::StatusOr<CoreSequences> core_sequences(CoreTaskType type, const Tokenizer& tokenizer,
                                             const std::vector<std::string>& prompts) {
  CoreSequences sequences;
  for (const std::string& prompt : prompts) {
    std::vector<int32_t> row = {tokenizer.bos_id()};
    tokenizer.encode(prompt, row);
    sequences.tokens.push_back(std::move(row));
  }
  std::vector<std::vector<int32_t>>& rows = sequences.tokens;
  switch (type) {
    case CoreTaskType::kMultipleChoice: {
      const int64_t shared_prefix = common_length(rows, /*from_end=*/false);
      for (const std::vector<int32_t>& row : rows) {
        sequences.start.push_back(shared_prefix);
        sequences.end.push_back(static_cast<int64_t>(row.size()));
      }
      break;
    }
    case CoreTaskType::kSchema: {
      const int64_t shared_suffix = common_length(rows, /*from_end=*/true);
      for (const std::vector<int32_t>& row : rows) {
        sequences.end.push_back(static_cast<int64_t>(row.size()));
        sequences.start.push_back(static_cast<int64_t>(row.size()) - shared_suffix);
      }
      break;
    }
    case CoreTaskType::kLanguageModeling: {
      const std::vector<int32_t>& without = rows[0];
      std::vector<int32_t>& with = rows[1];
      if (without.size() >= with.size() || !std::equal(without.begin(), without.end(), with.begin())) {
        return absl::InvalidArgumentError(
            "the prompt without the continuation does not tokenize to a proper prefix of the prompt with it "
            "(nanochat's core_eval asserts the same)");
      }
      sequences.start = {static_cast<int64_t>(without.size())};
      sequences.end = {static_cast<int64_t>(with.size())};
      rows.erase(rows.begin());
      break;
    }
  }
  return sequences;
}

}  // namespace nanoforge
