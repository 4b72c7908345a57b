// Helpers for the shard and loader tests: a temporary directory per test, and shards of synthetic documents
// whose tokens are a known function of (document, position).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/shards/shard_writer.h"

namespace nanoforge::testing {

// A fresh directory under the system's temp directory, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "nanoforge_data_test_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline constexpr int32_t kTestBos = 7;
inline constexpr int64_t kTestVocab = 1000;
inline constexpr char kTestTokenizerHash[] = "test-tokenizer-hash";

// Token i of global document `doc` (i = 0 is BOS): never BOS after position 0, always < vocab.
inline int32_t synthetic_token(int64_t doc, int64_t i, int64_t vocab = kTestVocab, int32_t bos = kTestBos) {
  if (i == 0) return bos;
  const auto value = static_cast<int32_t>((doc * 1009 + i * 7 + doc * i) % (vocab - 1));
  return value >= bos ? value + 1 : value;  // skip BOS
}

inline std::vector<int32_t> synthetic_document(int64_t doc, int64_t length, int64_t vocab = kTestVocab,
                                               int32_t bos = kTestBos) {
  std::vector<int32_t> tokens(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i)
    tokens[static_cast<size_t>(i)] = synthetic_token(doc, i, vocab, bos);
  return tokens;
}

inline std::vector<int64_t> random_lengths(int64_t count, int64_t min_length, int64_t max_length,
                                           uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int64_t> length(min_length, max_length);
  std::vector<int64_t> lengths(static_cast<size_t>(count));
  for (int64_t& value : lengths)
    value = length(generator);
  return lengths;
}

// Writes one shard per entry of `lengths_per_shard` (document lengths, BOS included) into `dir` as
// {split}_00000.h5, ...; documents are numbered globally across the shards in order. Returns the paths.
inline std::vector<std::string> write_synthetic_shards(
    const TempDir& dir, const std::vector<std::vector<int64_t>>& lengths_per_shard,
    int64_t vocab = kTestVocab, int32_t bos = kTestBos, const std::string& split = "train") {
  std::vector<std::string> paths;
  int64_t doc = 0;
  for (size_t s = 0; s < lengths_per_shard.size(); ++s) {
    const std::string path = dir.file(shard_file_name(split, static_cast<int64_t>(s)));
    auto writer = ShardWriter::create(path, {vocab, bos, kTestTokenizerHash});
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (int64_t length : lengths_per_shard[s]) {
      const std::vector<int32_t> tokens = synthetic_document(doc++, length, vocab, bos);
      EXPECT_TRUE(writer->append_document_with_bos(tokens).ok());
    }
    const absl::Status finished = writer->finish();
    EXPECT_TRUE(finished.ok()) << finished;
    paths.push_back(path);
  }
  return paths;
}

}  // namespace nanoforge::testing
