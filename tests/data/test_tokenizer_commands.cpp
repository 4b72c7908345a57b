// `nanoforge tokenizer train` and `nanoforge bench tokenizer` end to end: training on the golden documents
// writes exactly rustbpe's ranks, the bench prints its JSON line, and bad input fails naming the file.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "tokenizer_test_util.h"

namespace nanoforge {
namespace {

struct ProgramRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

ProgramRun run(const std::string& arguments) {
  const std::string command = std::string(NANOFORGE_BINARY) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe))
    output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string last_line(const std::string& output) {
  const size_t end = output.find_last_not_of('\n');
  const size_t start = output.rfind('\n', end);
  return output.substr(start == std::string::npos ? 0 : start + 1,
                       end - (start == std::string::npos ? 0 : start + 1) + 1);
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
