// The shards of one split (train or val), opened together, with one numbering of all their documents: shard
// 0's documents first, then shard 1's, and so on, shards in file-name order. The loader's order permutes
// these global document numbers and locate() turns one back into (shard, document, length). All shards must
// agree on vocabulary, BOS and tokenizer; the set's fingerprint ties a saved loader state to this data.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/shards/shard.h"

namespace nanoforge {

class ShardSet {
 public:
  // Opens every path (structure only), then, with options.verify_tokens, checks all tokens of all shards on
  // every core. The first error in path order is returned.
  static absl::StatusOr<std::shared_ptr<const ShardSet>> open(const std::vector<std::string>& paths,
                                                              const ShardOpenOptions& options);
  // From shards already open; checks they agree.
  static absl::StatusOr<std::shared_ptr<const ShardSet>> from_shards(std::vector<TokenShard> shards);

  int64_t shard_count() const { return static_cast<int64_t>(shards_.size()); }
  const TokenShard& shard(int64_t index) const { return shards_[static_cast<size_t>(index)]; }
  int64_t doc_count() const { return first_doc_.back(); }
  int64_t token_count() const { return token_count_; }
  int64_t vocab_size() const { return shards_.front().vocab_size(); }
  int32_t bos_id() const { return shards_.front().bos_id(); }
  const std::string& tokenizer_hash() const { return shards_.front().tokenizer_hash(); }

  struct DocLocation {
    int64_t shard = 0;
    int64_t doc = 0;     // within the shard
    int64_t length = 0;  // tokens, BOS included
  };
  // Global document number (0 .. doc_count()-1) to its shard and place: a binary search over the shards.
  DocLocation locate(int64_t global_doc) const;

  // 64-bit FNV-1a over each shard's file name (not its directory), token count, document count and stored
  // checksum: equal for the same data wherever it lies, different when a shard is added, removed or rebuilt.
  uint64_t fingerprint() const { return fingerprint_; }
  // "3 shards, 12,345 documents, 6,789,012 tokens".
  std::string describe() const;

 private:
  explicit ShardSet(std::vector<TokenShard> shards);
  std::vector<TokenShard> shards_;
  std::vector<int64_t> first_doc_;  // shard_count + 1 prefix sums of document counts
  int64_t token_count_ = 0;
  uint64_t fingerprint_ = 0;
};

// The shard files of `split` at `location`: a file is taken as it is; in a directory, the .h5 and .bin files
// whose name contains `split` as a word (separated by '_', '-' or '.': "train_00000.h5",
// "fineweb_train_000001.bin"), sorted by name. An empty split takes every .h5 and .bin file. Several
// locations may be given separated by commas. None found is an error naming the place and the pattern.
absl::StatusOr<std::vector<std::string>> list_shard_files(const std::string& location,
                                                          std::string_view split);

// The shards of `split` ("train" or "val") at `location`: list_shard_files for the split, or — when no file
// there names a split — every shard file. A location whose shards all belong to another split is refused
// (training on the validation shards by mistake), naming what is there.
absl::StatusOr<std::vector<std::string>> list_split_shard_files(const std::string& location,
                                                                std::string_view split);

}  // namespace nanoforge
