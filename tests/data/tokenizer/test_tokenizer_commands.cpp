// `nanoforge tokenizer train` and `nanoforge bench tokenizer` end to end: training on the golden documents
// writes exactly rustbpe's ranks, a tokenizer is replaced only with --overwrite, the bench prints its JSON
// line, and bad input fails naming the file. Without --out it writes to $NANOFORGE_BASE_DIR/tokenizer, and
// it never writes into a directory holding other files (the README's `--out data/tokenizer` once did).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/program_run.h"
#include "tests/test_paths.h"
#include "tokenizer_test_util.h"

namespace nanoforge {
namespace {

using test::last_line;
using test::ProgramRun;

ProgramRun run(const std::string& arguments) {
  return test::run_command(std::string(test::nanoforge_binary()) + " " + arguments + " 2>&1");
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

// The shards and runs made with a tokenizer name it: a second training into its directory is refused before
// any input is read, and leaves it as it was; --overwrite replaces it.
TEST(TokenizerCommands, TrainReplacesATokenizerOnlyWithOverwrite) {
  const std::string out = testing::fresh_temp_dir("command_twice");
  const std::string train = "tokenizer train --input " + testing::golden_path("tokenizer_train.jsonl") +
                            " --threads 1 --out " + out + " --vocab-size ";
  ASSERT_EQ(run(train + "300").exit_code, 0);
  const std::string first = testing::read_file(out + "/tokenizer.tiktoken");
  const ProgramRun again = run(train + "400");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("--out " + out + " already holds a tokenizer (tokenizer.tiktoken)"),
            std::string::npos)
      << again.output;
  EXPECT_EQ(again.output.find("counting pieces"), std::string::npos) << again.output;
  EXPECT_EQ(testing::read_file(out + "/tokenizer.tiktoken"), first);
  const ProgramRun replaced = run(train + "400 --overwrite");
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_NE(testing::read_file(out + "/tokenizer.tiktoken"), first);
}

TEST(TokenizerCommands, WithoutOutTheTokenizerGoesToTheBaseDirAndNothingIntoTheCurrentDirectory) {
  const std::string dir = testing::fresh_temp_dir("command_base_dir");
  std::filesystem::create_directories(dir + "/cwd");
  const std::string train_command = std::string(test::nanoforge_binary()) + " tokenizer train --input " +
                                    testing::golden_path("tokenizer_train.jsonl") +
                                    " --vocab-size 300 --threads 1";
  const ProgramRun train = test::run_command("cd " + dir + "/cwd && NANOFORGE_BASE_DIR=" + dir + "/base " +
                                             train_command + " 2>&1");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/base/tokenizer/tokenizer.tiktoken")) << train.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/base/tokenizer/special_tokens.txt")) << train.output;
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/cwd"));

  const ProgramRun homeless =
      test::run_command("env -u HOME -u NANOFORGE_BASE_DIR " + train_command + " 2>&1");
  EXPECT_EQ(homeless.exit_code, 1) << homeless.output;
  EXPECT_NE(homeless.output.find("no --out given, and neither NANOFORGE_BASE_DIR nor HOME is set"),
            std::string::npos)
      << homeless.output;
}

// `tokenizer train --out data/tokenizer` in a clone put its files beside data/tokenizer/*.cpp.
TEST(TokenizerCommands, ADirectoryHoldingOtherFilesIsRefusedAndLeftAsItWas) {
  const std::string out = testing::fresh_temp_dir("command_foreign");
  testing::write_file(out + "/bpe_merge.cpp", "// not a tokenizer's\n");
  for (const std::string extra : {"", " --overwrite"}) {
    const ProgramRun refused =
        run("tokenizer train --input " + testing::golden_path("tokenizer_train.jsonl") +
            " --vocab-size 300 --threads 1 --out " + out + extra);
    EXPECT_EQ(refused.exit_code, 1) << refused.output;
    EXPECT_NE(
        refused.output.find("--out " + out + " is not a directory of tokenizer train's outputs: it holds " +
                            out + "/bpe_merge.cpp, which nanoforge did not write"),
        std::string::npos)
        << refused.output;
    EXPECT_NE(refused.output.find("pick an empty or new directory, or drop --out for the default "
                                  "($NANOFORGE_BASE_DIR/tokenizer)"),
              std::string::npos)
        << refused.output;
    EXPECT_EQ(refused.output.find("counting pieces"), std::string::npos) << "refused before any work";
  }
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(out))
    entries.push_back(entry.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"bpe_merge.cpp"});
  EXPECT_EQ(testing::read_file(out + "/bpe_merge.cpp"), "// not a tokenizer's\n");
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
