// llm.c .bin shards: both token widths read through the same TokenShard view as HDF5 shards (mapped, split
// into documents at BOS, leading tokens before the first BOS left out), and every malformed file is refused
// with the file and the problem named. Files are written here byte by byte, as llm.c's write_datafile does.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "data/shards/llmc_bin.h"
#include "data/shards/open_shard.h"
#include "data/shards/shard_set.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge {
namespace {

using testing::TempDir;

constexpr int32_t kGpt2Bos = 50256;
constexpr int64_t kGpt2Vocab = 50257;

// llm.c's layout written independently of write_llmc_bin: 256 int32 header, then the tokens.
template <class Token>
std::string write_bin(const TempDir& dir, const std::string& name, int32_t magic, int32_t version,
                      const std::vector<Token>& tokens, std::optional<int32_t> count = std::nullopt) {
  std::array<int32_t, 256> header{};
  header[0] = magic;
  header[1] = version;
  header[2] = count.value_or(static_cast<int32_t>(tokens.size()));
  const std::string path = dir.file(name);
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(header.data()), sizeof(header));
  file.write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * sizeof(Token)));
  return path;
}

ShardOpenOptions gpt2() {
  ShardOpenOptions options;
  options.expect.vocab_size = kGpt2Vocab;
  options.expect.bos_id = kGpt2Bos;
  return options;
}

std::vector<int32_t> document(const TokenShard& shard, int64_t doc) {
  std::vector<int32_t> tokens(static_cast<size_t>(shard.doc_length(doc)));
  const absl::Status copied = shard.copy_document_prefix(doc, shard.doc_length(doc), tokens.data());
  EXPECT_TRUE(copied.ok()) << copied;
  return tokens;
}

void expect_error(const std::string& path, const ShardOpenOptions& options, absl::StatusCode code,
                  const std::string& what) {
  auto shard = open_token_shard(path, options);
  ASSERT_FALSE(shard.ok()) << "expected an error containing \"" << what << "\"";
  EXPECT_EQ(shard.status().code(), code) << shard.status();
  EXPECT_NE(shard.status().message().find(path), std::string::npos) << shard.status();
  EXPECT_NE(shard.status().message().find(what), std::string::npos) << shard.status();
}

TEST(LlmcBin, ReadsGpt2ShardsSplitAtEndOfText) {
  TempDir dir;
  const std::vector<uint16_t> tokens = {11, 12, kGpt2Bos, 1, 2, 3, kGpt2Bos, kGpt2Bos, 50000, 4};
  const std::string path = write_bin(dir, "fineweb_train_000001.bin", 20240520, 1, tokens);
  auto shard = open_token_shard(path, gpt2());
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->format(), ShardFormat::kLlmcBin);
  EXPECT_EQ(shard->bytes_per_token(), 2);
  EXPECT_TRUE(shard->tokens_memory_mapped());
  EXPECT_EQ(shard->token_count(), 10);
  EXPECT_EQ(shard->doc_count(), 3);
  EXPECT_EQ(shard->tokens_outside_documents(), 2) << "the two tokens before the first BOS";
  EXPECT_EQ(shard->tokenizer_hash(), "");
  EXPECT_EQ(document(*shard, 0), (std::vector<int32_t>{kGpt2Bos, 1, 2, 3}));
  EXPECT_EQ(document(*shard, 1), (std::vector<int32_t>{kGpt2Bos}));
  EXPECT_EQ(document(*shard, 2), (std::vector<int32_t>{kGpt2Bos, 50000, 4}));
  EXPECT_TRUE(shard->verify_tokens().ok());
}

TEST(LlmcBin, ReadsLlama3Uint32Shards) {
  TempDir dir;
  const int32_t bos = 128000;
  const std::vector<uint32_t> tokens = {128000, 70000, 5, 128000, 128255};
  const std::string path = write_bin(dir, "llama.bin", 20240801, 7, tokens);
  ShardOpenOptions options;
  options.expect.vocab_size = 128256;
  options.expect.bos_id = bos;
  auto shard = open_token_shard(path, options);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->bytes_per_token(), 4);
  EXPECT_EQ(shard->doc_count(), 2);
  EXPECT_EQ(document(*shard, 0), (std::vector<int32_t>{bos, 70000, 5}));
  EXPECT_EQ(document(*shard, 1), (std::vector<int32_t>{bos, 128255}));
}

TEST(LlmcBin, WriterProducesWhatLlmcWrites) {
  TempDir dir;
  const std::vector<int32_t> tokens = {kGpt2Bos, 10, 20, kGpt2Bos, 30};
  const std::string ours = dir.file("ours.bin");
  ASSERT_TRUE(write_llmc_bin(ours, tokens, LlmcTokenWidth::kUint16).ok());
  const std::string reference =
      write_bin(dir, "reference.bin", 20240520, 1, std::vector<uint16_t>(tokens.begin(), tokens.end()));
  std::ifstream a(ours, std::ios::binary), b(reference, std::ios::binary);
  const std::string ours_bytes((std::istreambuf_iterator<char>(a)), {});
  const std::string reference_bytes((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(ours_bytes, reference_bytes);
  EXPECT_FALSE(
      write_llmc_bin(dir.file("wide.bin"), std::vector<int32_t>{70000}, LlmcTokenWidth::kUint16).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.file("wide.bin")));
}

TEST(LlmcBin, MixesWithHdf5ShardsInOneSetOnlyWithTheSameVocabulary) {
  TempDir dir;
  const std::string bin = write_bin(dir, "a_train_0.bin", 20240520, 1, std::vector<uint16_t>{kGpt2Bos, 1, 2});
  auto set = ShardSet::open({bin}, gpt2());
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->doc_count(), 1);
}

TEST(LlmcBin, BadMagic) {
  TempDir dir;
  expect_error(write_bin(dir, "magic.bin", 12345, 1, std::vector<uint16_t>{kGpt2Bos}), gpt2(),
               absl::StatusCode::kInvalidArgument, "bad magic number 12345");
}

TEST(LlmcBin, UnknownVersion) {
  TempDir dir;
  expect_error(write_bin(dir, "v2.bin", 20240520, 2, std::vector<uint16_t>{kGpt2Bos}), gpt2(),
               absl::StatusCode::kInvalidArgument, "llm.c magic 20240520 with version 2");
}

TEST(LlmcBin, TruncatedTokens) {
  TempDir dir;
  expect_error(write_bin(dir, "cut.bin", 20240520, 1, std::vector<uint16_t>{kGpt2Bos, 1, 2}, 5), gpt2(),
               absl::StatusCode::kDataLoss, "truncated: the header says 5 tokens");
}

TEST(LlmcBin, TruncatedHeader) {
  TempDir dir;
  const std::string path = dir.file("header.bin");
  const std::array<int32_t, 3> partial = {20240520, 1, 3};
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(partial.data()), sizeof(partial));
  expect_error(path, gpt2(), absl::StatusCode::kDataLoss, "shorter than llm.c's 1024-byte header");
}

TEST(LlmcBin, TrailingBytes) {
  TempDir dir;
  expect_error(write_bin(dir, "long.bin", 20240520, 1, std::vector<uint16_t>{kGpt2Bos, 1, 2}, 2), gpt2(),
               absl::StatusCode::kDataLoss, "2 bytes after the 2 tokens");
}

TEST(LlmcBin, NegativeCount) {
  TempDir dir;
  expect_error(write_bin(dir, "neg.bin", 20240520, 1, std::vector<uint16_t>{kGpt2Bos}, -1), gpt2(),
               absl::StatusCode::kDataLoss, "negative token count");
}

TEST(LlmcBin, EmptyShard) {
  TempDir dir;
  expect_error(write_bin(dir, "empty.bin", 20240520, 1, std::vector<uint16_t>{}), gpt2(),
               absl::StatusCode::kInvalidArgument, "empty shard");
}

TEST(LlmcBin, NoBosMeansWrongBosId) {
  TempDir dir;
  ShardOpenOptions options = gpt2();
  options.expect.bos_id = 0;
  expect_error(write_bin(dir, "nobos.bin", 20240520, 1, std::vector<uint16_t>{5, 6, 7}), options,
               absl::StatusCode::kInvalidArgument, "no BOS token (id 0)");
}

TEST(LlmcBin, TokenOutsideTheVocabulary) {
  TempDir dir;
  expect_error(write_bin(dir, "oov.bin", 20240520, 1, std::vector<uint16_t>{kGpt2Bos, 60000}), gpt2(),
               absl::StatusCode::kDataLoss, "token 60000 at position 1 is outside the vocabulary");
}

TEST(LlmcBin, NeedsVocabularyAndBosAndRefusesATokenizerCheck) {
  TempDir dir;
  const std::string path = write_bin(dir, "ok.bin", 20240520, 1, std::vector<uint16_t>{kGpt2Bos, 1});
  expect_error(path, {}, absl::StatusCode::kInvalidArgument, "record no vocabulary size or BOS id");
  ShardOpenOptions options = gpt2();
  options.expect.tokenizer_hash = "abc";
  expect_error(path, options, absl::StatusCode::kFailedPrecondition, "record no tokenizer");
}

}  // namespace
}  // namespace nanoforge
