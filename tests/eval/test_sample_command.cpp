// `nanoforge sample` on a checkpoint, end to end: it continues the prompt, a seed repeats a sample, and what
// it prints is UTF-8 however the model strings bytes together. At temperature 5 over the whole vocabulary a
// barely trained model draws byte tokens at random — lone continuation bytes, half characters — which the
// command used to print raw; they now print as U+FFFD, as nanochat's decode gives them
// (data/tokenizer/utf8_text.h).
#include <string>

#include "data/tokenizer/utf8_text.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;

const std::string& sampled_run() {
  static const std::string dir = [] {
    const std::string run = temp_dir("sample_source");
    Recipe recipe = small_recipe();
    recipe.train.horizon.num_iterations = 2;
    recipe.train.eval_every = -1;
    recipe.train.sample_every = -1;
    recipe.checkpoint.every = -1;
    EXPECT_TRUE(run_training(recipe, stop_at(run, -1)).ok());
    return run;
  }();
  return dir;
}

ProgramRun sample(const std::string& flags) {
  return run_command(std::string(test::nanoforge_binary()) + " sample --checkpoint " + sampled_run() +
                     " --threads 1 --prompt 'The farmer' " + flags);
}

TEST(SampleCommand, PrintsUtf8ForAnyBytesTheModelDraws) {
  for (const char* seed : {"1", "2", "3", "4"}) {
    const ProgramRun result = sample(std::string("--max-tokens 48 --temperature 5 --top-k 0 --seed ") + seed);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(result.output.rfind("The farmer", 0), 0u) << result.output;
    EXPECT_GT(result.output.size(), std::string("The farmer\n").size()) << result.output;
    EXPECT_EQ(replace_invalid_utf8(result.output), result.output) << "seed " << seed << ": not UTF-8";
  }
}

TEST(SampleCommand, ASeedRepeatsItsSample) {
  const ProgramRun first = sample("--max-tokens 16 --temperature 1 --seed 9");
  const ProgramRun again = sample("--max-tokens 16 --temperature 1 --seed 9");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, again.output);
}

}  // namespace
}  // namespace nanoforge
