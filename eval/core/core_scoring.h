// Scoring one CORE example with the model, as core_eval.py's forward_model + evaluate_example: one forward
// pass over the example's rows (right-padded with BOS: the model is causal, so padding changes nothing
// before it), then
//   multiple choice, schema: the mean cross-entropy over each row's span; the option with the lowest mean is
//                            chosen (the first of equal ones; a NaN mean from an empty span is never lower,
//                            and wins only in first place, as Python's min() over floats), correct if gold;
//   language modelling:      correct when the argmax prediction matches every token of the span.
// Rows are padded to a multiple of 64 tokens so that consecutive examples mostly reuse the model's plan.
#pragma once

#include <cstdint>
#include <vector>

#include "eval/core/core_bundle.h"
#include "eval/core/core_sequences.h"
#include "kernels/device_buffer.h"
#include "model/gpt.h"

namespace nanoforge {

struct CoreOutcome {
  bool correct = false;
  int64_t chosen = -1;              // multiple choice, schema: the option picked
  std::vector<double> mean_losses;  // multiple choice, schema: per option (nats per token)
};

class CoreScorer {
 public:
  explicit CoreScorer(GPT& model) : model_(model) {}
  // Every row must fit the model: at most model.config().max_positions() tokens.
  CoreOutcome score(CoreTaskType type, const CoreSequences& sequences, int64_t gold);

 private:
  GPT& model_;
  std::vector<int32_t> ids_, targets_;
  DeviceBuffer device_rows_;  // ids then targets, for a GPU model
};

}  // namespace nanoforge
