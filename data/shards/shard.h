// A token shard opened for reading: its tokens as stored (uint16 or uint32, memory-mapped, no copy) and its
// document boundaries, behind one view whatever the file format: nanoforge's HDF5 shards (shard_hdf5.h) or
// llm.c / nanoGPT .bin files (llmc_bin.h); open_shard.h opens either. Opening checks the structure against
// the file's size and the caller's expectations; with `verify_tokens` it also reads every token once. Every
// problem comes back as an absl::Status that names the file and says what is wrong.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace nanoforge {

enum class ShardFormat { kNanoforgeHdf5, kLlmcBin };
const char* shard_format_name(ShardFormat format);

// What the caller knows about the data; an empty field is not checked. llm.c .bin files record neither the
// vocabulary nor BOS, so for them vocab_size and bos_id are required, and tokenizer_hash must be empty
// (they carry nothing to compare it with).
struct ShardExpectations {
  std::optional<int64_t> vocab_size;
  std::optional<int32_t> bos_id;
  std::optional<std::string> tokenizer_hash;
};

struct ShardOpenOptions {
  ShardExpectations expect;
  // Read every token on open: each is < vocab_size, each document starts with BOS, and the stored checksum
  // matches (HDF5 shards). One pass over the file at memory speed (docs/data.md). Without it, opening reads
  // the header and the document offsets only; the loader then checks each document as it copies it into a
  // batch (TokenShard::copy_document_prefix), so a bad token still stops training before the model sees it.
  // llm.c .bin files are always read whole on open: their documents are found by scanning for BOS.
  bool verify_tokens = true;
};

// What a format reader hands to TokenShard. `token_owner` / `offsets_owner` keep the memory behind the two
// pointers alive (a MappedFile or a vector).
struct TokenShardParts {
  std::string path;
  ShardFormat format = ShardFormat::kNanoforgeHdf5;
  int64_t vocab_size = 0;
  int32_t bos_id = 0;
  std::string tokenizer_hash;
  int bytes_per_token = 2;
  int64_t token_count = 0;
  int64_t doc_count = 0;
  std::shared_ptr<const void> token_owner;
  const void* tokens = nullptr;
  bool tokens_memory_mapped = false;
  std::shared_ptr<const void> offsets_owner;
  const int64_t* doc_offsets = nullptr;  // doc_count + 1 values
  int64_t tokens_outside_documents = 0;
  std::optional<uint64_t> stored_checksum;
};

class TokenShard {
 public:
  explicit TokenShard(TokenShardParts parts) : parts_(std::move(parts)) {}

  const std::string& path() const { return parts_.path; }
  ShardFormat format() const { return parts_.format; }
  int64_t vocab_size() const { return parts_.vocab_size; }
  int32_t bos_id() const { return parts_.bos_id; }
  const std::string& tokenizer_hash() const { return parts_.tokenizer_hash; }  // empty for .bin files
  int bytes_per_token() const { return parts_.bytes_per_token; }               // 2 (uint16) or 4 (uint32)
  int64_t token_count() const { return parts_.token_count; }
  int64_t doc_count() const { return parts_.doc_count; }
  bool tokens_memory_mapped() const { return parts_.tokens_memory_mapped; }
  std::optional<uint64_t> stored_checksum() const { return parts_.stored_checksum; }
  // Tokens that belong to no document: in a .bin file those before its first BOS (0 for HDF5 shards).
  int64_t tokens_outside_documents() const { return parts_.tokens_outside_documents; }

  // doc_count + 1 increasing offsets into the tokens: document d is tokens [offsets[d], offsets[d + 1]).
  std::span<const int64_t> doc_offsets() const {
    return {parts_.doc_offsets, static_cast<size_t>(parts_.doc_count + 1)};
  }
  int64_t doc_begin(int64_t doc) const { return parts_.doc_offsets[doc]; }
  int64_t doc_length(int64_t doc) const { return parts_.doc_offsets[doc + 1] - parts_.doc_offsets[doc]; }

  // The tokens as stored; Token must be uint16_t when bytes_per_token() == 2, uint32_t when 4.
  template <class Token>
  std::span<const Token> tokens() const {
    return {static_cast<const Token*>(parts_.tokens), static_cast<size_t>(parts_.token_count)};
  }

  // Copies the first `count` tokens of document `doc` (count <= doc_length(doc)) to out as int32, checking on
  // the way that the document starts with BOS and that every copied token is < vocab_size.
  absl::Status copy_document_prefix(int64_t doc, int64_t count, int32_t* out) const;

  // The full check of every token (what open() does with verify_tokens): all < vocab_size, BOS at every
  // document start, and the stored checksum, when the format has one.
  absl::Status verify_tokens() const;

 private:
  TokenShardParts parts_;
};

// The checks every format shares once its parts are assembled: sizes, offsets (start, strictly increasing,
// end at the token count), BOS inside the vocabulary, emptiness, and the caller's expectations.
absl::Status validate_shard_structure(const TokenShardParts& parts, const ShardExpectations& expect);

}  // namespace nanoforge
