// nanoforge's CORE evaluation against nanochat's own, example by example: the golden
// (tools/dev/make_core_golden.py) ran nanochat's base_eval.evaluate_core / core_eval.py on the committed
// checkpoint and bundle and recorded, for each example, its line in the task file (the shuffled order), the
// shots drawn, the rendered prompts, the token rows and scored spans, the options' mean losses or the argmax
// margin, and the verdict; and for each run the accuracies, centred accuracies and CORE metric.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>

#include "dist/single_communicator.h"
#include "eval/core/core_eval.h"
#include "eval/core/core_prompts.h"
#include "eval/core/core_scoring.h"
#include "eval/core/core_sequences.h"
#include "kernels/backend_info.h"
#include "tests/eval/core/core_test_support.h"
#include "train/checkpoint/model_file.h"

namespace nanoforge {
namespace {

using namespace test;

// nanoforge's CPU forward in fp32 against PyTorch's: the parity tests hold losses to 1e-4 relative; a mean
// loss here is ~4-8 nats, measured differences are ~1e-6.
constexpr double kMeanLossTolerance = 1e-4;
// A verdict is only compared where nanochat's own margin is wider than what the two fp32 forwards may differ
// by: the gap between the two lowest mean losses (multiple choice, schema), or between the two largest
// capped logits at some scored position (language modelling). Narrower margins would be a coin toss.
constexpr double kDecisionMargin = 1e-4;

struct Golden {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  Golden() {
    const simdjson::error_code error = parser.load(kCoreGolden).get(root);
    EXPECT_FALSE(error) << kCoreGolden << ": " << simdjson::error_message(error);
  }
};

template <class T>
std::vector<T> list_of(simdjson::dom::element element) {
  std::vector<T> values;
  for (simdjson::dom::element item : element.get_array()) {
    if constexpr (std::is_same_v<T, std::string>) {
      values.emplace_back(std::string_view(item.get_string()));
    } else if constexpr (std::is_same_v<T, double>) {
      values.push_back(item.is_null() ? NAN : double(item.get_double()));
    } else {
      values.push_back(static_cast<T>(int64_t(item.get_int64())));
    }
  }
  return values;
}

std::vector<double> mean_losses_of(simdjson::dom::element example) {
  std::vector<double> losses;
  for (simdjson::dom::element item : example["mean_losses"].get_array()) {
    // Python's json writes NaN as a bare NaN, which simdjson reads as invalid; the golden keeps it as null.
    losses.push_back(item.is_null() ? NAN : double(item.get_double()));
  }
  return losses;
}

// The gap between the lowest and the next lowest finite mean loss.
double decision_margin(const std::vector<double>& losses) {
  std::vector<double> finite;
  for (const double loss : losses) {
    if (!std::isnan(loss)) finite.push_back(loss);
  }
  std::sort(finite.begin(), finite.end());
  return finite.size() < 2 ? INFINITY : finite[1] - finite[0];
}

class CoreGoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_cpu_threads(1);  // ctest runs tests side by side
    absl::StatusOr<CoreBundle> read = CoreBundle::read(kCoreBundle);
    ASSERT_TRUE(read.ok()) << read.status();
    bundle_ = new CoreBundle(std::move(*read));
    absl::StatusOr<CheckpointModel> loaded = load_checkpoint_model(kCoreCheckpoint, kCoreTokenizer);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    model_ = new CheckpointModel(std::move(*loaded));
  }
  static CoreBundle* bundle_;
  static CheckpointModel* model_;
  Golden golden_;
};
CoreBundle* CoreGoldenTest::bundle_ = nullptr;
CheckpointModel* CoreGoldenTest::model_ = nullptr;

TEST_F(CoreGoldenTest, GoldenCoversBothBranchesOfSampleAndEveryTask) {
  size_t runs = 0;
  for (simdjson::dom::element run : golden_.root["runs"].get_array()) {
    EXPECT_EQ(simdjson::dom::array(run["tasks"]).size(), bundle_->tasks.size());
    ++runs;
  }
  EXPECT_EQ(runs, 2u);  // all examples, and --max-per-task 12
}

TEST_F(CoreGoldenTest, OrderShotsPromptsAndTokenSpansMatchNanochat) {
  const Tokenizer& tokenizer = model_->tokenizer;
  for (simdjson::dom::element run : golden_.root["runs"].get_array()) {
    const int64_t max_per_task = run["max_per_task"].get_int64();
    size_t t = 0;
    for (simdjson::dom::element golden_task : run["tasks"].get_array()) {
      const CoreTask& task = bundle_->tasks[t++];
      ASSERT_EQ(std::string_view(golden_task["label"].get_string()), task.label);
      const std::vector<const CoreExample*> data = core_task_examples(task, max_per_task);
      int64_t idx = 0;
      for (simdjson::dom::element golden_example : golden_task["examples"].get_array()) {
        SCOPED_TRACE(fmt::format("max_per_task {} task {} example {}", max_per_task, task.label, idx));
        ASSERT_LT(idx, static_cast<int64_t>(data.size()));
        EXPECT_EQ(data[idx]->line, int64_t(golden_example["line"].get_int64()));
        const std::vector<int64_t> shots =
            core_fewshot_indices(idx, static_cast<int64_t>(data.size()), task.num_fewshot);
        EXPECT_EQ(shots, list_of<int64_t>(golden_example["shots"]));
        std::vector<const CoreExample*> shot_examples;
        for (const int64_t shot : shots)
          shot_examples.push_back(data[shot]);
        const std::vector<std::string> prompts = render_core_prompts(task, *data[idx], shot_examples);
        EXPECT_EQ(prompts, list_of<std::string>(golden_example["prompts"]));
        absl::StatusOr<CoreSequences> sequences = core_sequences(task.type, tokenizer, prompts);
        ASSERT_TRUE(sequences.ok()) << sequences.status();
        std::vector<int64_t> lengths;
        std::vector<std::vector<int32_t>> spans;
        for (size_t r = 0; r < sequences->tokens.size(); ++r) {
          lengths.push_back(static_cast<int64_t>(sequences->tokens[r].size()));
          spans.emplace_back(sequences->tokens[r].begin() + sequences->start[r],
                             sequences->tokens[r].begin() + sequences->end[r]);
        }
        EXPECT_EQ(lengths, list_of<int64_t>(golden_example["lengths"]));
        EXPECT_EQ(sequences->start, list_of<int64_t>(golden_example["start"]));
        EXPECT_EQ(sequences->end, list_of<int64_t>(golden_example["end"]));
        std::vector<std::vector<int32_t>> golden_spans;
        for (simdjson::dom::element span : golden_example["span_tokens"].get_array())
          golden_spans.push_back(list_of<int32_t>(span));
        EXPECT_EQ(spans, golden_spans);
        ++idx;
      }
      EXPECT_EQ(idx, static_cast<int64_t>(data.size()));
    }
  }
}

TEST_F(CoreGoldenTest, ScoresAndVerdictsMatchNanochat) {
  CoreScorer scorer(*model_->model);
  int64_t compared = 0, too_close = 0;
  simdjson::dom::element run = golden_.root["runs"].at(0);
  size_t t = 0;
  for (simdjson::dom::element golden_task : run["tasks"].get_array()) {
    const CoreTask& task = bundle_->tasks[t++];
    const std::vector<const CoreExample*> data = core_task_examples(task, -1);
    int64_t idx = 0;
    for (simdjson::dom::element golden_example : golden_task["examples"].get_array()) {
      SCOPED_TRACE(fmt::format("task {} example {} (line {})", task.label, idx, data[idx]->line));
      std::vector<const CoreExample*> shots;
      for (const int64_t shot :
           core_fewshot_indices(idx, static_cast<int64_t>(data.size()), task.num_fewshot))
        shots.push_back(data[shot]);
      const absl::StatusOr<CoreSequences> sequences =
          core_sequences(task.type, model_->tokenizer, render_core_prompts(task, *data[idx], shots));
      ASSERT_TRUE(sequences.ok());
      const CoreOutcome outcome = scorer.score(task.type, *sequences, data[idx]->gold);
      double margin = INFINITY;
      if (task.type == CoreTaskType::kLanguageModeling) {
        margin = golden_example["argmax_margin"].get_double();
      } else {
        const std::vector<double> expected = mean_losses_of(golden_example);
        ASSERT_EQ(outcome.mean_losses.size(), expected.size());
        for (size_t o = 0; o < expected.size(); ++o) {
          EXPECT_EQ(std::isnan(outcome.mean_losses[o]), std::isnan(expected[o])) << "option " << o;
          if (!std::isnan(expected[o])) {
            EXPECT_NEAR(outcome.mean_losses[o], expected[o], kMeanLossTolerance);
          }
        }
        margin = decision_margin(expected);
      }
      if (margin > kDecisionMargin) {
        EXPECT_EQ(outcome.correct, bool(golden_example["correct"].get_bool()));
        ++compared;
      } else {
        ++too_close;
      }
      ++idx;
    }
  }
  EXPECT_EQ(too_close, 0) << "examples whose verdict nanochat itself decided by less than "
                          << kDecisionMargin;
  EXPECT_EQ(compared, bundle_->example_count());
}

TEST_F(CoreGoldenTest, EvaluateCoreGivesNanochatsResults) {
  SingleCommunicator communicator(Device::kCpu);
  for (simdjson::dom::element run : golden_.root["runs"].get_array()) {
    CoreEvalOptions options;
    options.max_per_task = run["max_per_task"].get_int64();
    SCOPED_TRACE(fmt::format("max_per_task {}", options.max_per_task));
    absl::StatusOr<CoreResults> results =
        evaluate_core(*model_->model, model_->tokenizer, *bundle_, options, communicator);
    ASSERT_TRUE(results.ok()) << results.status();
    size_t t = 0;
    for (simdjson::dom::element golden_task : run["tasks"].get_array()) {
      const CoreTaskResult& task = results->tasks[t++];
      std::vector<uint8_t> expected;
      for (simdjson::dom::element example : golden_task["examples"].get_array())
        expected.push_back(bool(example["correct"].get_bool()) ? 1 : 0);
      EXPECT_EQ(task.correct, expected) << task.label;
      // The same verdicts give the same numbers, bit for bit: nanochat's float32 mean, then its float64
      // formulas (without fused multiply-adds, as Python computes them).
      EXPECT_EQ(task.accuracy, double(run["results"][task.label].get_double())) << task.label;
      EXPECT_EQ(task.centered, double(run["centered_results"][task.label].get_double())) << task.label;
    }
    EXPECT_EQ(results->core_metric, double(run["core_metric"].get_double()));
  }
}

}  // namespace
}  // namespace nanoforge
