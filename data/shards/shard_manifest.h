// The manifest of a data set `nanoforge prep` wrote: DIR/manifest.txt, published last, lists every shard
// (size, CRC-32, documents, tokens, token checksum), the counts per split, the tokenizer, the input's
// identity and the command line. While prep runs the same record, of the shards finished so far, is
// DIR/prep.unfinished: what `prep --resume` continues from. The loader trains on a prep directory only when
// its manifest is complete and its shards agree with it (check_shard_manifests). Format: docs/data.md.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/shards/shard_set.h"

namespace nanoforge {

inline constexpr char kShardManifestName[] = "manifest.txt";
inline constexpr char kPrepJournalName[] = "prep.unfinished";

struct ManifestShard {
  std::string name;  // "train_00003.h5", in the manifest's directory
  int64_t bytes = 0;
  uint32_t crc32 = 0;  // of the whole file (support/file_checksum.h)
  int64_t documents = 0, tokens = 0;
  uint64_t token_checksum = 0;  // the shard's own token_checksum attribute
  std::string split() const { return name.substr(0, name.find('_')); }
};

struct ShardManifest {
  // What made the shards: a resume must find every one of these unchanged.
  std::string tokenizer_hash;
  int64_t vocab_size = 0, bos_id = 0;
  int64_t shard_tokens = 0, val_docs = 0;
  std::string text_split, text_column;
  std::vector<std::string> inputs;  // "BYTES MTIME_NS PATH" per input file, in reading order
  std::string command_line;         // of the prep that started the data set
  // How far it got: input documents consumed (empty ones included) by the shards listed.
  int64_t input_documents = 0, empty_documents = 0;
  uint64_t text_bytes = 0;
  std::vector<ManifestShard> shards;  // in the order written

  int64_t documents(std::string_view split) const;
  int64_t tokens(std::string_view split) const;
  int64_t shard_count(std::string_view split) const;

  std::string to_text() const;
  // `source` names the file in errors.
  static absl::StatusOr<ShardManifest> parse(std::string_view text, const std::string& source);
};

// 16 hex digits of FNV-1a 64 over the manifest file's bytes: what a checkpoint records of its data set.
std::string manifest_hash(std::string_view manifest_text);

// Writes `text` to PATH.tmp, fsyncs it, renames it to PATH and fsyncs the directory (support/output_path.h
// writes without fsync: a result file, not a record that must survive a crash).
absl::Status write_file_durably(const std::string& path, std::string_view text);

// The loader's rule, for the shards of `split` opened from `location` (comma-separated places): every
// directory among the places that holds nanoforge HDF5 shards, and the directory of every such shard named
// directly when it has a manifest, must have a complete manifest.txt whose `split` shards are exactly the
// set's, each with the size, documents, tokens, checksum and tokenizer listed. llm.c .bin shards need none.
// Returns the manifest hashes (comma-separated in place order; "" when no manifest applies), or an error
// naming the file and saying how to fix it.
absl::StatusOr<std::string> check_shard_manifests(const std::string& location, std::string_view split,
                                                  const ShardSet& set);

}  // namespace nanoforge
