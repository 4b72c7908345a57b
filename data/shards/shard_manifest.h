// The manifest of a data set `nanoforge prep` wrote: DIR/manifest.txt, published last, lists every shard
// (size, CRC-32, documents, tokens, token checksum), the counts per split, the tokenizer, the input's
// identity and the command line. While prep runs the same record, of the shards finished so far, is
// DIR/prep.unfinished: what `prep --resume` continues from. Its last line is a checksum of the lines above,
// so an edited or damaged manifest is refused. A run trains on a prep directory only when its manifest is
// complete and its shards agree with it, byte for byte (check_shard_files, check_shard_manifests). Format
// and costs: docs/data.md.
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
// Format 2 added the manifest's own checksum and the hash of the input documents; format 1 is still read.
inline constexpr int kShardManifestVersion = 2;
// FNV-1a 64's start: the hash of no bytes, and of no documents.
inline constexpr uint64_t kFnv1aStart = 0xcbf29ce484222325ull;

struct ManifestShard {
  std::string name;  // "train_00003.h5", in the manifest's directory
  int64_t bytes = 0;
  uint32_t crc32 = 0;  // of the whole file (support/file_checksum.h)
  int64_t documents = 0, tokens = 0;
  uint64_t token_checksum = 0;  // the shard's own token_checksum attribute
  std::string split() const { return name.substr(0, name.find('_')); }
};

struct ShardManifest {
  int format_version = kShardManifestVersion;
  // What made the shards: a resume must find every one of these unchanged.
  std::string tokenizer_hash;
  int64_t vocab_size = 0, bos_id = 0;
  int64_t shard_tokens = 0, val_docs = 0;
  std::string text_split, text_column;
  // "BYTES MTIME_NS HASH PATH" per input file, in reading order; HASH: FNV-1a 64 of its first and last MiB
  // (format 1: "BYTES MTIME_NS PATH").
  std::vector<std::string> inputs;
  std::string command_line;  // of the prep that started the data set
  // How far it got: input documents consumed (empty ones included) by the shards listed, and a hash of their
  // texts (document_hash folded in order; format 2) that a resume recomputes over the input it reads again.
  int64_t input_documents = 0, empty_documents = 0;
  uint64_t input_documents_hash = kFnv1aStart;
  uint64_t text_bytes = 0;
  std::vector<ManifestShard> shards;  // in the order written

  int64_t documents(std::string_view split) const;
  int64_t tokens(std::string_view split) const;
  int64_t shard_count(std::string_view split) const;

  std::string to_text() const;
  // `source` names the file in errors. Refused: a checksum that does not match, a line of an unknown key or
  // damaged, totals or counts that do not add up, anything not written exactly as to_text writes it.
  static absl::StatusOr<ShardManifest> parse(std::string_view text, const std::string& source);
};

// FNV-1a 64 of `bytes`, continuing `hash`: the manifest's checksum, its hash and the documents' hash.
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1aStart);

// 16 hex digits of FNV-1a 64 over the manifest file's bytes: what a checkpoint records of its data set.
std::string manifest_hash(std::string_view manifest_text);

// The input documents' hash: each document's text hashed (fnv1a64), its 8 bytes (little-endian) folded into
// the running hash in reading order.
uint64_t fold_document_hash(uint64_t running, uint64_t document_hash);

// Writes `text` to PATH.tmp, fsyncs it, renames it to PATH and fsyncs the directory (support/output_path.h
// writes without fsync: a result file, not a record that must survive a crash).
absl::Status write_file_durably(const std::string& path, std::string_view text);

// The rule below, before the shards are opened: each of `files` (list_split_shard_files' shards of `split`
// at `location`) that a manifest governs must have the size and CRC-32 listed, so that no parser, ours or
// libhdf5's, reads a shard whose bytes changed after prep wrote it. The CRCs are computed on all cores, one
// read of every such shard (docs/data.md: the cost). Returns how many of `files` were checked so (the others:
// llm.c .bin files, shard files named on their own outside a prep's directory), or an error naming the file
// and saying how to fix it.
absl::StatusOr<int64_t> check_shard_files(const std::string& location, std::string_view split,
                                          const std::vector<std::string>& files);

// The loader's rule, for the shards of `split` opened from `location` (comma-separated places): every
// directory among the places that holds nanoforge HDF5 shards, and the directory of every such shard named
// directly when it has a manifest, must have a complete manifest.txt whose `split` shards are exactly the
// set's, each with the size, documents, tokens, checksum and tokenizer listed. llm.c .bin shards need none.
// Returns the manifest hashes (comma-separated in place order; "" when no manifest applies), or an error
// naming the file and saying how to fix it.
absl::StatusOr<std::string> check_shard_manifests(const std::string& location, std::string_view split,
                                                  const ShardSet& set);

}  // namespace nanoforge
