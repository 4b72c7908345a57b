// nanochat's CORE metric (scripts/base_eval.py evaluate_core with nanochat/core_eval.py): for each task of
// the bundle, its examples shuffled by random.Random(1337) and cut to max_per_task; example idx gets
// num_fewshot shots drawn by random.Random(1234 + idx).sample from the other examples; each is rendered,
// tokenized and scored (core_prompts, core_sequences, core_scoring). Accuracy is the mean of the per-example
// results (in float32), centred = (accuracy - b) / (1 - b) with b the random baseline / 100, and CORE the
// mean of the centred accuracies. Data parallel as nanochat: rank r scores examples r, r + W, ..., summed
// over ranks; which errors stop every rank, and when: docs/core.md, "Data parallel".
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "dist/communicator.h"
#include "eval/core/core_bundle.h"
#include "model/gpt.h"

namespace nanoforge {

struct CoreTaskResult {
  std::string label;
  CoreTaskType type = CoreTaskType::kMultipleChoice;
  int64_t num_fewshot = 0;
  double accuracy = 0;
  double centered = 0;
  std::vector<uint8_t> correct;  // per example, in evaluation order (shuffled, cut)
  double seconds = 0;
};

struct CoreResults {
  std::vector<CoreTaskResult> tasks;
  double core_metric = 0;
  int64_t examples = 0;
  double seconds = 0;
};

struct CoreEvalOptions {
  int64_t max_per_task = -1;  // examples per task after the shuffle; <= 0: all (nanochat's -1)
  // Called on every rank after each task, before the next starts (progress lines).
  std::function<void(const CoreTaskResult&)> on_task;
};

// A task's examples in evaluation order: base_eval's random.Random(1337).shuffle, then the first
// max_per_task (all when max_per_task <= 0).
std::vector<const CoreExample*> core_task_examples(const CoreTask& task, int64_t max_per_task);
// The shots of example idx of `count`: core_eval's random.Random(1234 + idx).sample of the other indices.
// Needs num_fewshot < count.
std::vector<int64_t> core_fewshot_indices(int64_t idx, int64_t count, int64_t num_fewshot);

// Every task's preconditions under `max_per_task`, checked before anything is scored: each task keeps at
// least one example and more than its num_fewshot. The error names `setting` (the flag or recipe key), lists
// every task that cannot run and says which values work.
absl::Status check_core_max_per_task(const CoreBundle& bundle, int64_t max_per_task,
                                     std::string_view setting);

// Checks check_core_max_per_task and every prompt's length first. The model is re-planned as it goes; plan it
// again for training afterwards.
absl::StatusOr<CoreResults> evaluate_core(GPT& model, const Tokenizer& tokenizer, const CoreBundle& bundle,
                                          const CoreEvalOptions& options, Communicator& communicator);

}  // namespace nanoforge
