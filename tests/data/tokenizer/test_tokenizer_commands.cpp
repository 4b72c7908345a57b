// `nanoforge tokenizer train` and `nanoforge bench tokenizer` end to end: training on the golden documents
// writes exactly rustbpe's ranks, the bench prints its JSON line, and bad input fails naming the file.
#include <gtest/gtest.h>

#include <string>

#include "tests/program_run.h"
#include "tokenizer_test_util.h"

namespace nanoforge {
namespace {

using test::last_line;
using test::ProgramRun;

ProgramRun run(const std::string& arguments) {
  return test::run_command(std::string(NANOFORGE_BINARY) + " " + arguments + " 2>&1");
}

TEST(TokenizerCommands, TrainWritesRustbpesRanksForTheGoldenDocuments) {
  const std::string out = testing::fresh_temp_dir("command_train");
  const ProgramRun train = run("tokenizer train --input " + testing::golden_path("tokenizer_train.jsonl") +
                               " --vocab-size 2048 --doc-max-chars 0 --threads 2 --out " + out);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_EQ(testing::read_file(out + "/tokenizer.tiktoken"),
            testing::read_file(testing::golden_path("tokenizer.tiktoken")));
  EXPECT_EQ(testing::read_file(out + "/special_tokens.txt"),
            testing::read_file(testing::golden_path("special_tokens.txt")));
  EXPECT_NE(last_line(train.output).find("\"command\": \"tokenizer train\", \"vocab_size\": 2048"),
            std::string::npos)
      << train.output;
}

TEST(TokenizerCommands, TrainRefusesBadInputNamingIt) {
  const std::string dir = testing::fresh_temp_dir("command_bad");
  const ProgramRun missing = run("tokenizer train --input " + dir + "/nope.jsonl --out " + dir + "/tok");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find(dir + "/nope.jsonl does not exist"), std::string::npos) << missing.output;
  testing::write_file(dir + "/bad.jsonl", "{\"text\": \"fine\"}\n{\"txt\": \"oops\"}\n");
  const ProgramRun bad = run("tokenizer train --input " + dir + "/bad.jsonl --out " + dir + "/tok");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find(dir + "/bad.jsonl:2: the JSON object has no \"text\" field"), std::string::npos)
      << bad.output;
  const ProgramRun small = run("tokenizer train --input " + dir + "/bad.jsonl --vocab-size 265 --out " + dir);
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_NE(small.output.find("--vocab-size 265 leaves no merges"), std::string::npos) << small.output;
}

TEST(TokenizerCommands, BenchPrintsAJsonLine) {
  const ProgramRun bench = run("bench tokenizer --bench-mb 1 --passes 1 --threads 2");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const std::string json = last_line(bench.output);
  EXPECT_EQ(json.rfind("{\"bench\": \"tokenizer\", \"mb_per_s_1_thread\": ", 0), 0u) << json;
  EXPECT_NE(json.find("\"vocab_size\": 2048"), std::string::npos) << json;
}

}  // namespace
}  // namespace nanoforge
