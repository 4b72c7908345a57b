// `nanoforge prep` on every kind of input gives the same shards, byte for byte, as the same documents in
// JSON lines: a parquet file pyarrow wrote (several row groups, non-ASCII, an empty text, a null, read on 1
// and 3 threads), .jsonl.gz, .jsonl.zst, and standard input (plain and compressed).
#include <gtest/gtest.h>

#include <filesystem>

#include "data/documents/parquet_documents.h"
#include "tests/data/documents/input_test_files.h"
#include "tests/test_paths.h"

namespace nanoforge {
namespace {

using test::run_command;
using testing::fresh_temp_dir;
using testing::golden_dir;
using testing::read_file;
using testing::write_file;

// Runs prep; returns every shard file's bytes by name (empty and a test failure if prep failed).
std::map<std::string, std::string> prep_shards_of(const std::string& input, const std::string& out,
                                                  const std::string& extra = "") {
  const auto run =
      run_command(std::string(test::nanoforge_binary()) + " prep --input " + input + " --tokenizer " +
                  golden_dir() + " --out " + out + " --val-docs 5 --shard-tokens 20000 " + extra + " 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::map<std::string, std::string> shards;
  if (run.exit_code != 0) return shards;
  EXPECT_TRUE(std::filesystem::exists(out + "/manifest.txt"));  // it names the input: not compared here
  for (const auto& entry : std::filesystem::directory_iterator(out))
    if (entry.path().extension() == ".h5")
      shards[entry.path().filename().string()] = read_file(entry.path().string());
  return shards;
}

TEST(PrepInputs, ParquetGivesTheShardsOfTheSameJsonLines) {
  std::string why;
  const std::string fixtures = testing::parquet_fixtures(why);
  if (!parquet_supported())
    GTEST_SKIP() << "this build has no Arrow (data_documents_tests checks the refusal)";
  if (fixtures.empty()) GTEST_SKIP() << why;
  const std::string dir = fresh_temp_dir("prep_parquet");
  const auto expected = prep_shards_of(fixtures + "/docs.jsonl", dir + "/jsonl");
  ASSERT_GE(expected.size(), 3u);  // val and several train shards
  EXPECT_EQ(prep_shards_of(fixtures + "/docs.parquet", dir + "/parquet1", "--threads 1"), expected);
  EXPECT_EQ(prep_shards_of(fixtures + "/docs.parquet", dir + "/parquet3", "--threads 3"), expected);
  EXPECT_EQ(prep_shards_of(fixtures + "/large.parquet", dir + "/large"), expected);
  const auto run =
      run_command(std::string(test::nanoforge_binary()) + " prep --input " + fixtures +
                  "/docs.parquet --tokenizer " + golden_dir() + " --out " + dir + "/again --val-docs 5 2>&1");
  EXPECT_NE(run.output.find("1 null texts skipped"), std::string::npos) << run.output;
}

TEST(PrepInputs, CompressedAndStandardInputGiveTheShardsOfThePlainFile) {
  const std::string dir = fresh_temp_dir("prep_streams");
  std::string lines;
  for (int i = 0; i < 300; ++i) {
    lines += "{\"text\": \"Document " + std::to_string(i) + ": caf\\u00e9 \\u65e5\\u672c " +
             std::string(static_cast<size_t>(i % 17), 'x') + " word" + std::to_string(i * 7 % 31) + "\"}\n";
  }
  write_file(dir + "/docs.jsonl", lines);
  write_file(dir + "/docs.jsonl.gz", testing::gzip_bytes(lines));
  write_file(dir + "/docs.jsonl.zst", testing::zstd_bytes(lines));
  const auto expected = prep_shards_of(dir + "/docs.jsonl", dir + "/plain");
  ASSERT_GE(expected.size(), 2u);
  EXPECT_EQ(prep_shards_of(dir + "/docs.jsonl.gz", dir + "/gz"), expected);
  EXPECT_EQ(prep_shards_of(dir + "/docs.jsonl.zst", dir + "/zst"), expected);
  EXPECT_EQ(prep_shards_of("- < " + dir + "/docs.jsonl", dir + "/stdin"), expected);
  EXPECT_EQ(prep_shards_of("- < " + dir + "/docs.jsonl.zst", dir + "/stdin_zst"), expected);
}

}  // namespace
}  // namespace nanoforge
