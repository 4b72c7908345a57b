// Helpers for the shard and loader tests: a temporary directory per test, shards of synthetic documents whose
// tokens are a known function of (document, position), and nanochat's packing loop written out plainly as a
// reference for the optimised packer.
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

#include "data/bos_bestfit_packer.h"
#include "data/shard_writer.h"

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

// nanochat's loop (nanochat/dataloader.py) on document lengths, as plainly as it is written in Python: a list
// buffer refilled to `buffer_docs` before every pick, the largest fitting document (strict >, so the first
// among ties), else the shortest (min, so the first among ties) cropped. `length_at(position)` gives the
// stream; segments carry the stream position in `doc`.
template <class LengthAt>
std::vector<std::vector<PackedSegment>> reference_bestfit_rows(LengthAt length_at, int64_t capacity,
                                                               int64_t buffer_docs, int64_t rows) {
  std::vector<std::pair<int64_t, int64_t>> buffer;  // (position, length)
  int64_t next_position = 0;
  std::vector<std::vector<PackedSegment>> result;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<PackedSegment> row;
    int64_t pos = 0;
    while (pos < capacity) {
      while (static_cast<int64_t>(buffer.size()) < buffer_docs) {
        buffer.emplace_back(next_position, length_at(next_position));
        ++next_position;
      }
      const int64_t remaining = capacity - pos;
      int64_t best_index = -1, best_length = 0;
      for (size_t i = 0; i < buffer.size(); ++i) {
        if (buffer[i].second <= remaining && buffer[i].second > best_length) {
          best_index = static_cast<int64_t>(i);
          best_length = buffer[i].second;
        }
      }
      if (best_index >= 0) {
        row.push_back({buffer[best_index].first, buffer[best_index].first, best_length});
        buffer.erase(buffer.begin() + best_index);
        pos += best_length;
      } else {
        size_t shortest = 0;
        for (size_t i = 1; i < buffer.size(); ++i) {
          if (buffer[i].second < buffer[shortest].second) shortest = i;
        }
        row.push_back({buffer[shortest].first, buffer[shortest].first, remaining});
        buffer.erase(buffer.begin() + static_cast<std::ptrdiff_t>(shortest));
        pos += remaining;
      }
    }
    result.push_back(std::move(row));
  }
  return result;
}

}  // namespace nanoforge::testing
