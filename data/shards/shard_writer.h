// Writes one nanoforge token shard (format in data/shards/shard_hdf5.h) from whole documents, for `nanoforge
// prep` and tools. The shard is held in memory (a contiguous HDF5 dataset cannot grow) and finish() writes it
// in one go under a temporary name, fsyncs it and renames it over the final name: that name never holds a
// half-written shard, even after a crash. docs/data.md (Writing) shows its use.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nanoforge {

struct ShardMetadata {
  int64_t vocab_size = 0;
  int32_t bos_id = 0;
  std::string tokenizer_hash;  // Tokenizer::hash(): the loader checks it against the tokenizer it trains with
};

class ShardWriter {
 public:
  // Checks the metadata; writes nothing until finish().
  static absl::StatusOr<ShardWriter> create(std::string path, ShardMetadata metadata);

  // Appends one document: BOS, then `text_tokens` (the ids of Tokenizer::encode, which never yields BOS).
  // Rejects ids outside [0, vocab_size) and BOS inside the text, leaving the shard unchanged.
  absl::Status append_document(std::span<const int32_t> text_tokens);
  // Appends one document given with its leading BOS (tokens[0] must be BOS, and no later token).
  absl::Status append_document_with_bos(std::span<const int32_t> tokens);
  // Reserve room for this many tokens (optional; avoids regrowing the buffer).
  void reserve_tokens(int64_t token_count);

  int64_t token_count() const;
  int64_t doc_count() const { return static_cast<int64_t>(doc_offsets_.size()) - 1; }
  const std::string& path() const { return path_; }

  // Writes the shard and renames it into place (see the file comment); frees the buffer. An empty shard is
  // an error (nothing is written). No append or finish after a finish.
  absl::Status finish();

 private:
  ShardWriter(std::string path, ShardMetadata metadata);
  absl::Status check_tokens(std::span<const int32_t> tokens, bool first_is_bos) const;
  void append_tokens(std::span<const int32_t> tokens);

  std::string path_;
  ShardMetadata metadata_;
  bool uint16_tokens_ = true;
  std::vector<uint16_t> tokens16_;
  std::vector<uint32_t> tokens32_;
  std::vector<int64_t> doc_offsets_{0};
  bool finished_ = false;
};

// The file name of shard `index` of a split, as prep writes it: "train_00000.h5", "val_00003.h5". The
// loader's list_shard_files finds them by this pattern.
std::string shard_file_name(std::string_view split, int64_t index);

}  // namespace nanoforge
