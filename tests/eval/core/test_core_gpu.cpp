// CORE on the CUDA backend against nanochat's fp32 golden: the same examples, shots and spans, scored in
// bf16. Mean losses follow the golden within bf16 noise, and every verdict nanochat did not decide by a
// margin inside that noise is the same. On the CUDA emulator where there is no GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>

#include "eval/core/core_eval.h"
#include "eval/core/core_prompts.h"
#include "eval/core/core_scoring.h"
#include "kernels/cuda/cuda_memory.h"
#include "tests/eval/core/core_test_support.h"
#include "train/checkpoint/model_file.h"

namespace nanoforge {
namespace {

using namespace test;

// An option's mean loss is over a few continuation tokens, so little of the bf16 noise averages away.
// Measured on the CUDA emulator (bf16 products exact, fp32 accumulation, as tensor cores compute) against
// nanochat's fp32 golden: up to 0.56 nats at a loss of 8.7 (6.4 %) and 0.18 nats at 1.4 (13 %, inside the
// absolute part); bits per byte over 1,024 tokens move by only 0.6 %. The bound is that with some room: 0.1 +
// 8 %. (The first bound, 0.05 + 2 %, was argued before anything had run, and failed on 30 options.)
constexpr double kLossTolerance = 0.1, kLossRelativeTolerance = 0.08;
double loss_tolerance(double loss) {
  return kLossTolerance + kLossRelativeTolerance * std::abs(loss);
}
// Verdicts are compared where nanochat's margin is wider than the two options' noise together (the best two
// mean losses), or, for language modelling, where the top-1 and top-2 capped logits are 0.5 apart at every
// scored position (capped logits of magnitude <= 15 carry ~2 % error, ~0.2 each).
constexpr double kLogitMargin = 0.5;

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
          EXPECT_NEAR(got, expected, loss_tolerance(expected));
          finite.push_back(expected);
        }
        std::sort(finite.begin(), finite.end());
        decided = finite.size() < 2 ||
                  finite[1] - finite[0] > loss_tolerance(finite[0]) + loss_tolerance(finite[1]);
      }
      if (decided) {
        EXPECT_EQ(outcome.correct, bool(golden_example["correct"].get_bool()));
        ++compared;
      }
      ++examples;
      ++idx;
    }
  }
  // A 0.5M-parameter model decides most examples by less than the bf16 noise: 45 of the 148 verdicts are
  // outside it (29 of 100 language-modelling, 16 of 48 choice examples). A test that compared few would prove
  // little, so at least a quarter must be compared.
  EXPECT_GE(compared, examples / 4) << compared << " of " << examples << " verdicts compared";
}

}  // namespace
}  // namespace nanoforge
