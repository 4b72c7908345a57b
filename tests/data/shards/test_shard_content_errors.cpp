// A shard whose structure is sound but whose content is wrong or not what the run expects: a checksum that
// does not match, another tokenizer, BOS outside the vocabulary, an empty shard; shard directories with
// stray entries and sets that mix shards. Also: shards written by another tool with chunked storage still
// read (by copying).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>

#include "data/shards/open_shard.h"
#include "data/shards/shard_hdf5.h"
#include "data/shards/shard_set.h"
#include "h5/file.h"
#include "tests/data/shards/raw_shard.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge {
namespace {

using testing::expect_error;
using testing::kTestBos;
using testing::RawShard;
using testing::structure_only;
using testing::TempDir;
using testing::verifying;
using testing::write_raw;

// The probe's self-referential symlink in a shard directory threw std::filesystem_error out of the program.
TEST(ShardErrors, LoopingSymlinkInAShardDirectoryIsSkipped) {
  TempDir dir;
  const std::string shard = write_raw(dir, "train_00000.h5", RawShard{});
  std::filesystem::create_symlink("train_00001.h5", dir.file("train_00001.h5"));  // points at itself
  std::filesystem::create_symlink(dir.file("missing.h5"), dir.file("train_00002.h5"));
  const absl::StatusOr<std::vector<std::string>> files = list_shard_files(dir.path(), "train");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, std::vector<std::string>{shard});
}

TEST(ShardErrors, ADirectoryOfAnotherSplitIsRefused) {
  TempDir dir;
  write_raw(dir, "val_00000.h5", RawShard{});
  const absl::StatusOr<std::vector<std::string>> train = list_split_shard_files(dir.path(), "train");
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(train.status().message().find("no train shards, only shards of another split (val_00000.h5)"),
            std::string::npos)
      << train.status();
  EXPECT_TRUE(list_split_shard_files(dir.path(), "val").ok());
  TempDir unnamed;
  write_raw(unnamed, "fineweb_00000.h5", RawShard{});
  EXPECT_TRUE(list_split_shard_files(unnamed.path(), "train").ok()) << "names without a split: all are taken";
}

TEST(ShardErrors, ChecksumMismatch) {
  TempDir dir;
  RawShard raw;
  raw.checksum = 12345;
  expect_error(write_raw(dir, "sum.h5", raw), verifying(), absl::StatusCode::kDataLoss,
               "does not match the stored 0x0000000000003039");
}

// A valid token replaced in the file itself: the structure is fine, the checksum is not.
TEST(ShardErrors, CorruptedTokenBytesCaughtByTheChecksum) {
  TempDir dir;
  const auto paths = testing::write_synthetic_shards(dir, {{50, 60, 70}});
  int64_t token_offset = 0;
  {
    auto file = H5File::open_read(paths[0]);
    ASSERT_TRUE(file.ok());
    token_offset = file->dataset_layout(kShardTokensDataset)->file_offset;
  }
  {
    std::fstream stream(paths[0], std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(token_offset + 2 * 100);
    const uint16_t replacement = 3;  // a valid id, different from what is there
    stream.write(reinterpret_cast<const char*>(&replacement), 2);
  }
  ASSERT_NE(testing::synthetic_token(1, 50), 3);
  expect_error(paths[0], verifying(), absl::StatusCode::kDataLoss, "token checksum");
  EXPECT_TRUE(open_token_shard(paths[0], structure_only()).ok());
}

TEST(ShardErrors, AnotherTokenizer) {
  TempDir dir;
  const std::string path = write_raw(dir, "tok.h5", {});
  ShardOpenOptions options;
  options.expect.tokenizer_hash = "another-hash";
  expect_error(path, options, absl::StatusCode::kFailedPrecondition,
               "tokenizer hash test-tokenizer-hash but another-hash expected");
  options = {};
  options.expect.vocab_size = 32768;
  expect_error(path, options, absl::StatusCode::kFailedPrecondition,
               "vocabulary size 1000 but 32768 expected");
  options = {};
  options.expect.bos_id = 32759;
  expect_error(path, options, absl::StatusCode::kFailedPrecondition, "BOS id 7 but 32759 expected");
}

TEST(ShardErrors, BosOutsideTheVocabulary) {
  TempDir dir;
  RawShard raw;
  raw.bos = 5000;
  expect_error(write_raw(dir, "bos.h5", raw), structure_only(), absl::StatusCode::kInvalidArgument,
               "BOS id 5000 is outside the vocabulary");
}

TEST(ShardErrors, EmptyShard) {
  TempDir dir;
  RawShard raw;
  raw.tokens = {};
  raw.offsets = {0};
  expect_error(write_raw(dir, "empty.h5", raw), verifying(), absl::StatusCode::kInvalidArgument,
               "empty shard");
}

TEST(ShardErrors, ShardsOfDifferentTokenizersDoNotMix) {
  TempDir dir;
  const std::string first = write_raw(dir, "a.h5", {});
  RawShard other;
  other.hash = "other";
  const std::string second = write_raw(dir, "b.h5", other);
  auto set = ShardSet::open({first, second}, verifying());
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(set.status().message().find(first), std::string::npos);
  EXPECT_NE(set.status().message().find(second), std::string::npos);
}

TEST(ShardErrors, SetVerificationReportsTheFirstBadShard) {
  TempDir dir;
  std::vector<std::string> paths;
  for (int i = 0; i < 6; ++i) {
    RawShard raw;
    if (i == 2 || i == 4) raw.tokens = {kTestBos, 1, 2, kTestBos, 4000};
    paths.push_back(write_raw(dir, fmt::format("s{}.h5", i), raw));
  }
  auto set = ShardSet::open(paths, verifying());
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find(paths[2]), std::string::npos) << set.status();
  ShardOpenOptions lazy;
  lazy.verify_tokens = false;
  EXPECT_TRUE(ShardSet::open(paths, lazy).ok());
}

// A shard written by another tool with chunked, compressed tokens (h5py with chunks= or compression=) still
// reads: the reader copies what it cannot map.
TEST(ShardFormat, ChunkedTokensFromAnotherWriterAreCopied) {
  TempDir dir;
  RawShard raw;
  const std::string path = write_raw(dir, "chunked.h5", raw);
  {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    ASSERT_GE(H5Ldelete(file, kShardTokensDataset, H5P_DEFAULT), 0);
    const hsize_t count = raw.tokens.size(), chunk = 2;
    hid_t space = H5Screate_simple(1, &count, nullptr);
    hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(properties, 1, &chunk);
    H5Pset_deflate(properties, 4);
    hid_t dataset =
        H5Dcreate2(file, kShardTokensDataset, H5T_STD_U16LE, space, H5P_DEFAULT, properties, H5P_DEFAULT);
    ASSERT_GE(dataset, 0);
    ASSERT_GE(H5Dwrite(dataset, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.tokens.data()), 0);
    H5Dclose(dataset);
    H5Pclose(properties);
    H5Sclose(space);
    H5Fclose(file);
  }
  auto shard = open_token_shard(path, verifying());
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_FALSE(shard->tokens_memory_mapped());
  const std::span<const uint16_t> tokens = shard->tokens<uint16_t>();
  EXPECT_EQ(std::vector<uint16_t>(tokens.begin(), tokens.end()), raw.tokens);
}

}  // namespace
}  // namespace nanoforge
