// CORE on the CUDA backend against nanochat's fp32 golden: the same examples, shots and spans, scored in
// bf16. Mean losses follow the golden within bf16 noise, and every verdict nanochat did not decide by a
// margin inside that noise is the same. Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>

#include "kernels/cuda/cuda_memory.h"
#include "tests/train/core/core_test_support.h"
#include "train/checkpoint/model_file.h"
#include "train/core/core_eval.h"
#include "train/core/core_prompts.h"
#include "train/core/core_scoring.h"

namespace nanoforge {
namespace {

using namespace test;

// bf16 activations keep 8 significant bits (~0.4 % per rounding); a mean loss of ~4-8 nats through a
// two-layer model should move by a few hundredths of a nat. Not yet measured (no GPU was at hand when this
// was written): 0.05 + 2 % is about twice the 1 % the training GPU test allows its first-step loss over 512
// tokens, since an option's mean here is over a few tokens.
constexpr double kLossTolerance = 0.05, kLossRelativeTolerance = 0.02;
// Verdicts compared where nanochat's margin is wider than twice that noise: mean losses 0.2 nats apart, or
// top-1 and top-2 capped logits 0.5 apart at every scored position.
constexpr double kLossMargin = 0.2, kLogitMargin = 0.5;

TEST(CoreGpu, FollowsNanochatsGoldenInBf16) {
  std::string reason;
  if (!cuda::available(&reason)) GTEST_SKIP() << "no usable GPU: " << reason;
  absl::StatusOr<CoreBundle> bundle = CoreBundle::read(kCoreBundle);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  absl::StatusOr<CheckpointModel> loaded =
      load_checkpoint_model(kCoreCheckpoint, kCoreTokenizer, Device::kCuda);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_FALSE(parser.load(kCoreGolden).get(root));
  CoreScorer scorer(*loaded->model);
  int64_t compared = 0, examples = 0;
  size_t t = 0;
  for (simdjson::dom::element golden_task : root["runs"].at(0)["tasks"].get_array()) {
    const CoreTask& task = bundle->tasks[t++];
    const std::vector<const CoreExample*> data = core_task_examples(task, -1);
    int64_t idx = 0;
    for (simdjson::dom::element golden_example : golden_task["examples"].get_array()) {
      SCOPED_TRACE(fmt::format("task {} example {}", task.label, idx));
      std::vector<const CoreExample*> shots;
      for (const int64_t shot :
           core_fewshot_indices(idx, static_cast<int64_t>(data.size()), task.num_fewshot))
        shots.push_back(data[shot]);
      const absl::StatusOr<CoreSequences> sequences =
          core_sequences(task.type, loaded->tokenizer, render_core_prompts(task, *data[idx], shots));
      ASSERT_TRUE(sequences.ok());
      const CoreOutcome outcome = scorer.score(task.type, *sequences, data[idx]->gold);
      bool decided = true;
      if (task.type == CoreTaskType::kLanguageModeling) {
        decided = double(golden_example["argmax_margin"].get_double()) > kLogitMargin;
      } else {
        std::vector<double> finite;
        size_t option = 0;
        for (simdjson::dom::element loss : golden_example["mean_losses"].get_array()) {
          const double got = outcome.mean_losses[option++];
          EXPECT_EQ(loss.is_null(), std::isnan(got));
          if (loss.is_null()) continue;
          const double expected = loss.get_double();
          EXPECT_NEAR(got, expected, kLossTolerance + kLossRelativeTolerance * std::abs(expected));
          finite.push_back(expected);
        }
        std::sort(finite.begin(), finite.end());
        decided = finite.size() < 2 || finite[1] - finite[0] > kLossMargin;
      }
      if (decided) {
        EXPECT_EQ(outcome.correct, bool(golden_example["correct"].get_bool()));
        ++compared;
      }
      ++examples;
      ++idx;
    }
  }
  // Most verdicts are far from a tie; a test that compared few would prove little.
  EXPECT_GT(compared, examples / 2) << compared << " of " << examples << " verdicts compared";
}

}  // namespace
}  // namespace nanoforge
