// evaluate_core: the task loop, the shot draws, the split over ranks and the sums.
#include "eval/core/core_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "eval/core/core_prompts.h"
#include "eval/core/core_scoring.h"
#include "eval/core/core_sequences.h"
#include "eval/core/python_random.h"
#include "kernels/device_buffer.h"
#include "kernels/host_transfer.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr uint64_t kShuffleSeed = 1337;      // base_eval.py: random.Random(1337).shuffle(data)
constexpr uint64_t kFewshotSeedBase = 1234;  // core_eval.py: random.Random(1234 + idx)

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Example idx's prompts: its shots drawn from `data` (core_fewshot_indices), then rendered.
std::vector<std::string> example_prompts(const CoreTask& task, const std::vector<const CoreExample*>& data,
                                         int64_t idx) {
  std::vector<const CoreExample*> shots;
  for (const int64_t shot : core_fewshot_indices(idx, static_cast<int64_t>(data.size()), task.num_fewshot))
    shots.push_back(data[static_cast<size_t>(shot)]);
  return render_core_prompts(task, *data[static_cast<size_t>(idx)], shots);
}

// The prompts' token rows, each within the model's positions; the error names the task and the example's
// line in its file.
absl::StatusOr<CoreSequences> example_sequences(const CoreTask& task, const CoreExample& example,
                                                const std::vector<std::string>& prompts,
                                                const Tokenizer& tokenizer, const GPTConfig& model) {
  auto in_example = [&](const std::string& why) {
    return absl::InvalidArgumentError(fmt::format("task {}, example on line {} of {}: {}", task.label,
                                                  example.line, task.dataset_uri, why));
  };
  absl::StatusOr<CoreSequences> sequences = core_sequences(task.type, tokenizer, prompts);
  if (!sequences.ok()) return in_example(std::string(sequences.status().message()));
  for (const std::vector<int32_t>& row : sequences->tokens) {
    if (static_cast<int64_t>(row.size()) > model.max_positions()) {
      return in_example(fmt::format(
          "its {}-shot prompt is {} tokens, more than the {} positions the model can read (10 x its "
          "sequence_len {}, nanochat's rotary limit); lower num_fewshot or use a model with a longer context",
          task.num_fewshot, row.size(), model.max_positions(), model.sequence_len));
    }
  }
  return sequences;
}

// Every example of every task (all ranks' shares, so that every rank stops alike without a word to the
// others) fits the model, before any is scored. A row is BOS and then its prompt's tokens, each at least
// one byte (byte-level BPE), so only a prompt of max_positions bytes or more is tokenized to be measured.
absl::Status check_core_prompt_lengths(const CoreBundle& bundle, int64_t max_per_task,
                                       const Tokenizer& tokenizer, const GPTConfig& model) {
  for (const CoreTask& task : bundle.tasks) {
    const std::vector<const CoreExample*> data = core_task_examples(task, max_per_task);
    for (int64_t idx = 0; idx < static_cast<int64_t>(data.size()); ++idx) {
      const std::vector<std::string> prompts = example_prompts(task, data, idx);
      const bool may_not_fit = std::any_of(prompts.begin(), prompts.end(), [&](const std::string& prompt) {
        return static_cast<int64_t>(prompt.size()) + 1 > model.max_positions();
      });
      if (may_not_fit) {
        NANOFORGE_RETURN_IF_ERROR(
            example_sequences(task, *data[static_cast<size_t>(idx)], prompts, tokenizer, model).status());
      }
    }
  }
  return absl::OkStatus();
}

// One example end to end. Its length was checked by check_core_prompt_lengths; example_sequences checks it
// again, cheaply, because the scorer must never be given a row longer than the model's positions.
absl::StatusOr<bool> evaluate_example(const CoreTask& task, const std::vector<const CoreExample*>& data,
                                      int64_t idx, const Tokenizer& tokenizer, CoreScorer& scorer,
                                      const GPTConfig& model) {
  const CoreExample& example = *data[static_cast<size_t>(idx)];
  NANOFORGE_ASSIGN_OR_RETURN(
      const CoreSequences sequences,
      example_sequences(task, example, example_prompts(task, data, idx), tokenizer, model));
  return scorer.score(task.type, sequences, example.gold).correct;
}

}  // namespace

std::vector<const CoreExample*> core_task_examples(const CoreTask& task, int64_t max_per_task) {
  std::vector<const CoreExample*> data;
  for (const CoreExample& example : task.examples)
    data.push_back(&example);
  PythonRandom(kShuffleSeed).shuffle(data);
  if (max_per_task > 0 && static_cast<size_t>(max_per_task) < data.size())
    data.resize(static_cast<size_t>(max_per_task));
  return data;
}

absl::Status check_core_max_per_task(const CoreBundle& bundle, int64_t max_per_task,
                                     std::string_view setting) {
  std::vector<std::string> too_few_kept, too_few_in_file;
  int64_t smallest_working = 1;
  for (const CoreTask& task : bundle.tasks) {
    const int64_t available = static_cast<int64_t>(task.examples.size());
    const int64_t kept = max_per_task > 0 ? std::min(available, max_per_task) : available;
    const int64_t needed = std::max<int64_t>(1, task.num_fewshot + 1);  // the example and its shots
    smallest_working = std::max(smallest_working, needed);
    const std::string need = task.num_fewshot > 0
                                 ? fmt::format("{} shots need at least {} examples", task.num_fewshot, needed)
                                 : std::string("needs at least 1 example");
    if (available < needed) {
      too_few_in_file.push_back(
          fmt::format("{} ({}; eval_data/{} has {})", task.label, need, task.dataset_uri, available));
    } else if (kept < needed) {
      too_few_kept.push_back(fmt::format("{} ({}, the cut keeps {})", task.label, need, kept));
    }
  }
  if (!too_few_in_file.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {} task{} cannot run with any {}: {}; give the task more examples or lower its num_fewshot in "
        "core.yaml",
        bundle.dir, too_few_in_file.size(), too_few_in_file.size() == 1 ? "" : "s", setting,
        fmt::join(too_few_in_file, ", ")));
  }
  if (!too_few_kept.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{} {} is too few for {} task{} of {}: {}; give {} {} or more, or -1 (all examples)",
                    setting, max_per_task, too_few_kept.size(), too_few_kept.size() == 1 ? "" : "s",
                    bundle.dir, fmt::join(too_few_kept, ", "), setting, smallest_working));
  }
  return absl::OkStatus();
}

std::vector<int64_t> core_fewshot_indices(int64_t idx, int64_t count, int64_t num_fewshot) {
  if (num_fewshot <= 0) return {};
  std::vector<int64_t> available;
  for (int64_t i = 0; i < count; ++i) {
    if (i != idx) available.push_back(i);
  }
  return PythonRandom(kFewshotSeedBase + static_cast<uint64_t>(idx))
      .sample(available, static_cast<size_t>(num_fewshot));
}

absl::StatusOr<CoreResults> evaluate_core(GPT& model, const Tokenizer& tokenizer, const CoreBundle& bundle,
                                          const CoreEvalOptions& options, Communicator& communicator) {
  NANOFORGE_RETURN_IF_ERROR(check_core_max_per_task(bundle, options.max_per_task, "max_per_task"));
  NANOFORGE_RETURN_IF_ERROR(
      check_core_prompt_lengths(bundle, options.max_per_task, tokenizer, model.config()));
  const auto start = std::chrono::steady_clock::now();
  const int64_t rank = communicator.rank(), world_size = communicator.world_size();
  CoreScorer scorer(model);
  CoreResults results;
  for (const CoreTask& task : bundle.tasks) {
    const auto task_start = std::chrono::steady_clock::now();
    const std::vector<const CoreExample*> data = core_task_examples(task, options.max_per_task);
    const int64_t count = static_cast<int64_t>(data.size());
    // Per example 1 if correct, then this rank's error count, summed over ranks.
    std::vector<double> sums(static_cast<size_t>(count) + 1, 0.0);
    absl::Status error;
    for (int64_t idx = rank; idx < count && error.ok(); idx += world_size) {
      absl::StatusOr<bool> correct = evaluate_example(task, data, idx, tokenizer, scorer, model.config());
      if (correct.ok()) {
        sums[static_cast<size_t>(idx)] = *correct ? 1.0 : 0.0;
      } else {
        error = correct.status();
        sums.back() = 1.0;
      }
    }
    if (world_size > 1) {
      DeviceBuffer buffer(model.device(), static_cast<int64_t>(sums.size() * sizeof(double)));
      const TensorView view(buffer.data(), {static_cast<int64_t>(sums.size())}, DType::kF64, model.device());
      upload<double>(view, sums.data());
      NANOFORGE_RETURN_IF_ERROR(communicator.all_reduce(view, ReduceOp::kSum).wait());
      sums = download<double>(view);
    }
    if (!error.ok()) return error;
    if (sums.back() > 0) {
      return absl::InvalidArgumentError(
          fmt::format("task {}: another rank failed on an example (its message names it)", task.label));
    }
    CoreTaskResult result;
    result.label = task.label;
    result.type = task.type;
    result.num_fewshot = task.num_fewshot;
    float correct_count = 0;
    for (int64_t i = 0; i < count; ++i) {
      result.correct.push_back(sums[static_cast<size_t>(i)] > 0.5 ? 1 : 0);
      correct_count += static_cast<float>(result.correct.back());
    }
    // torch's float32 mean of the 0/1 tensor, then Python's float arithmetic.
    result.accuracy = static_cast<double>(correct_count / static_cast<float>(count));
    const double baseline = 0.01 * task.random_baseline_percent;
    result.centered = (result.accuracy - baseline) / (1.0 - baseline);
    result.seconds = seconds_since(task_start);
    results.examples += count;
    if (options.on_task) options.on_task(result);
    results.tasks.push_back(std::move(result));
  }
  double centered_sum = 0;
  for (const CoreTaskResult& task : results.tasks)
    centered_sum += task.centered;
  results.core_metric = centered_sum / static_cast<double>(results.tasks.size());
  results.seconds = seconds_since(start);
  return results;
}

}  // namespace nanoforge
