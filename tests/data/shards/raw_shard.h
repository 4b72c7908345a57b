// RawShard: a shard written field by field, so that each error test can break one thing; and the check
// that opening a file fails with a message that names it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/shards/open_shard.h"
#include "data/shards/shard_hdf5.h"
#include "data/shards/shard_token_scan.h"
#include "h5/file.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge::testing {

// A shard written field by field, so that each test can break one thing.
struct RawShard {
  std::vector<uint16_t> tokens = {kTestBos, 1, 2, kTestBos, 3};
  std::vector<int64_t> offsets = {0, 3, 5};
  bool write_format = true;
  std::string format = kShardFormatName;
  int64_t version = kShardFormatVersion;
  int64_t vocab = kTestVocab;
  bool vocab_as_string = false;
  int64_t bos = kTestBos;
  std::string hash = kTestTokenizerHash;
  std::optional<int64_t> token_count;  // default: tokens.size()
  std::optional<int64_t> doc_count;    // default: offsets.size() - 1
  std::optional<uint64_t> checksum;    // default: the right one
  bool tokens_as_int32 = false;
  // Attributes before datasets: the strings' heap then precedes the datasets, whose bytes end the file.
  bool attributes_first = false;
};

inline std::string write_raw(const TempDir& dir, const std::string& name, const RawShard& raw) {
  const std::string path = dir.file(name);
  auto file = H5File::create(path, kShardAlignmentBytes);
  EXPECT_TRUE(file.ok());
  const auto write_datasets = [&] {
    if (raw.tokens_as_int32) {
      std::vector<int32_t> wide(raw.tokens.begin(), raw.tokens.end());
      EXPECT_TRUE(file->write(kShardTokensDataset, {static_cast<int64_t>(wide.size())}, wide.data()).ok());
    } else {
      EXPECT_TRUE(
          file->write(kShardTokensDataset, {static_cast<int64_t>(raw.tokens.size())}, raw.tokens.data())
              .ok());
    }
    EXPECT_TRUE(
        file->write(kShardOffsetsDataset, {static_cast<int64_t>(raw.offsets.size())}, raw.offsets.data())
            .ok());
  };
  if (!raw.attributes_first) write_datasets();
  if (raw.write_format) {
    EXPECT_TRUE(file->write_string_attribute("/", "format", raw.format).ok());
  }
  EXPECT_TRUE(file->write_int_attribute("/", "format_version", raw.version).ok());
  if (raw.vocab_as_string) {
    EXPECT_TRUE(file->write_string_attribute("/", "vocab_size", std::to_string(raw.vocab)).ok());
  } else {
    EXPECT_TRUE(file->write_int_attribute("/", "vocab_size", raw.vocab).ok());
  }
  EXPECT_TRUE(file->write_int_attribute("/", "bos_id", raw.bos).ok());
  EXPECT_TRUE(file->write_string_attribute("/", "tokenizer_hash", raw.hash).ok());
  EXPECT_TRUE(file->write_int_attribute("/", "token_count",
                                        raw.token_count.value_or(static_cast<int64_t>(raw.tokens.size())))
                  .ok());
  EXPECT_TRUE(file->write_int_attribute("/", "doc_count",
                                        raw.doc_count.value_or(static_cast<int64_t>(raw.offsets.size()) - 1))
                  .ok());
  const uint64_t checksum = raw.checksum.value_or(token_checksum(std::span<const uint16_t>(raw.tokens)));
  EXPECT_TRUE(file->write_int_attribute("/", "token_checksum", static_cast<int64_t>(checksum)).ok());
  if (raw.attributes_first) write_datasets();
  return path;
}

// Opens and expects an error of `code` whose message names the file and contains `what`.
inline void expect_error(const std::string& path, const ShardOpenOptions& options, absl::StatusCode code,
                         const std::string& what) {
  auto shard = open_token_shard(path, options);
  ASSERT_FALSE(shard.ok()) << "expected an error containing \"" << what << "\" for " << path;
  EXPECT_EQ(shard.status().code(), code) << shard.status();
  EXPECT_NE(shard.status().message().find(path), std::string::npos)
      << "error must name the file: " << shard.status();
  EXPECT_NE(shard.status().message().find(what), std::string::npos) << shard.status();
}

inline ShardOpenOptions verifying() {
  return {};
}
inline ShardOpenOptions structure_only() {
  ShardOpenOptions options;
  options.verify_tokens = false;
  return options;
}

}  // namespace nanoforge::testing
