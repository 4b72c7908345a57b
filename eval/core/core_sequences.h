// From an example's prompts to the token rows the model scores, as core_eval.py's batch_sequences_*: every
// prompt is encoded with BOS first (ordinary encoding, no special tokens), and the scored span of each row
// is found in token space, not text space, so a continuation that merges with the text before it is
// handled as nanochat handles it:
//   multiple choice:    the span starts where the rows stop sharing a prefix and runs to each row's end;
//   schema:             the span is the suffix all rows share;
//   language modelling: one row (the prompt with the continuation); the span starts after the tokens of the
//                       prompt without it, which must be a proper prefix (nanochat asserts it).
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "eval/core/core_bundle.h"

namespace nanoforge {

struct CoreSequences {
  std::vector<std::vector<int32_t>> tokens;  // one row per option (language modelling: one row)
  // The scored tokens of row i are tokens[i][start[i] .. end[i]); the losses and predictions that score
  // them sit one position earlier. start may equal end (an empty span: a NaN loss, as in PyTorch).
  std::vector<int64_t> start, end;
};

absl::StatusOr<CoreSequences> core_sequences(CoreTaskType type, const Tokenizer& tokenizer,
                                             const std::vector<std::string>& prompts);

}  // namespace nanoforge
