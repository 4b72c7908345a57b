// TokenShard: the structural checks every format shares, and the token checks (the full scan on open and
// the per-document check the loader does as it copies).
#include "data/shards/shard.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/shards/shard_token_scan.h"
#include "support/status.h"

namespace nanoforge {

const char* shard_format_name(ShardFormat format) {
  switch (format) {
    case ShardFormat::kNanoforgeHdf5:
      return "nanoforge HDF5 shard";
    case ShardFormat::kLlmcBin:
      return "llm.c .bin shard";
  }
  return "shard";
}

absl::Status validate_shard_structure(const TokenShardParts& parts, const ShardExpectations& expect) {
  const std::string& path = parts.path;
  if (parts.token_count == 0 || parts.doc_count == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: empty shard ({} tokens, {} documents): nothing to train on; remove it or re-create it", path,
        parts.token_count, parts.doc_count));
  }
  if (parts.vocab_size < 1 || parts.vocab_size > (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: vocab_size {} is outside [1, 2^32] (corrupt header?)", path, parts.vocab_size));
  }
  if (parts.bytes_per_token == 2 && parts.vocab_size > 65536) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: vocab_size {} needs 32-bit tokens but the tokens are stored as uint16 (corrupt shard)", path,
        parts.vocab_size));
  }
  if (parts.bos_id < 0 || parts.bos_id >= parts.vocab_size) {
    return absl::InvalidArgumentError(
        fmt::format("{}: BOS id {} is outside the vocabulary [0, {})", path, parts.bos_id, parts.vocab_size));
  }
  const std::span<const int64_t> offsets(parts.doc_offsets, static_cast<size_t>(parts.doc_count + 1));
  if (offsets.front() < 0 || offsets.back() != parts.token_count) {
    return absl::DataLossError(fmt::format(
        "{}: document offsets run from {} to {}, expected them to end at the token count {} (corrupt shard)",
        path, offsets.front(), offsets.back(), parts.token_count));
  }
  for (size_t d = 0; d + 1 < offsets.size(); ++d) {
    if (offsets[d + 1] <= offsets[d]) {
      return absl::DataLossError(fmt::format(
          "{}: document offsets are not increasing: offset[{}] = {}, offset[{}] = {} (corrupt shard; every "
          "document holds at least its BOS token)",
          path, d, offsets[d], d + 1, offsets[d + 1]));
    }
  }
  if (expect.vocab_size && *expect.vocab_size != parts.vocab_size) {
    return absl::FailedPreconditionError(
        fmt::format("{}: vocabulary size {} but {} expected: this shard was made with another tokenizer",
                    path, parts.vocab_size, *expect.vocab_size));
  }
  if (expect.bos_id && *expect.bos_id != parts.bos_id) {
    return absl::FailedPreconditionError(
        fmt::format("{}: BOS id {} but {} expected: this shard was made with another tokenizer", path,
                    parts.bos_id, *expect.bos_id));
  }
  if (expect.tokenizer_hash && *expect.tokenizer_hash != parts.tokenizer_hash) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: tokenizer hash {} but {} expected: this shard was made with another tokenizer; re-run prep "
        "with the tokenizer you train with",
        path, parts.tokenizer_hash.empty() ? "(none)" : parts.tokenizer_hash, *expect.tokenizer_hash));
  }
  return absl::OkStatus();
}

namespace {

template <class Token>
absl::Status copy_document_prefix_typed(const TokenShard& shard, int64_t doc, int64_t count, int32_t* out) {
  const int64_t begin = shard.doc_begin(doc);
  const std::span<const Token> tokens = shard.tokens<Token>().subspan(begin, count);
  const uint32_t largest = widen_tokens(tokens, out);
  if (count > 0 && out[0] != shard.bos_id()) {
    return absl::DataLossError(fmt::format(
        "{}: document {} (tokens {}..{}) starts with token {}, not BOS {} (corrupt shard or wrong BOS id)",
        shard.path(), doc, begin, begin + shard.doc_length(doc), out[0], shard.bos_id()));
  }
  if (const int32_t* inner = std::find(out + std::min<int64_t>(count, 1), out + count, shard.bos_id());
      inner != out + count) {
    return absl::DataLossError(fmt::format(
        "{}: document {} holds BOS {} inside it, at position {}: every document starts with BOS and holds it "
        "nowhere else (corrupt shard, or its writer did not encode with the ordinary encoder)",
        shard.path(), doc, shard.bos_id(), begin + (inner - out)));
  }
  if (static_cast<int64_t>(largest) >= shard.vocab_size()) {
    const int64_t at = find_first_at_or_above(tokens, shard.vocab_size());
    return absl::DataLossError(fmt::format(
        "{}: token {} at position {} (document {}) is outside the vocabulary (vocab_size {}): the shard is "
        "corrupt or was made with another tokenizer",
        shard.path(), static_cast<uint32_t>(tokens[at]), begin + at, doc, shard.vocab_size()));
  }
  return absl::OkStatus();
}

template <class Token>
absl::Status verify_tokens_typed(const TokenShard& shard) {
  const std::span<const Token> tokens = shard.tokens<Token>();
  const TokenScanResult scan = scan_tokens(tokens, shard.vocab_size());
  if (scan.first_out_of_vocab >= 0) {
    return absl::DataLossError(fmt::format(
        "{}: token {} at position {} is outside the vocabulary (vocab_size {}): the shard is corrupt or was "
        "made with another tokenizer",
        shard.path(), scan.out_of_vocab_value, scan.first_out_of_vocab, shard.vocab_size()));
  }
  const std::span<const int64_t> offsets = shard.doc_offsets();
  for (int64_t d = 0; d < shard.doc_count(); ++d) {
    if (tokens[offsets[d]] != static_cast<Token>(shard.bos_id())) {
      return absl::DataLossError(fmt::format(
          "{}: document {} (tokens {}..{}) starts with token {}, not BOS {} (corrupt shard or wrong BOS id)",
          shard.path(), d, offsets[d], offsets[d + 1], static_cast<uint32_t>(tokens[offsets[d]]),
          shard.bos_id()));
    }
  }
  if (count_token(tokens, static_cast<uint32_t>(shard.bos_id())) != shard.doc_count()) {
    // Every document starts with BOS (checked above), so some document holds another: find the first.
    for (int64_t d = 0; d < shard.doc_count(); ++d) {
      const auto begin = tokens.begin() + offsets[d] + 1, end = tokens.begin() + offsets[d + 1];
      const auto inner = std::find(begin, end, static_cast<Token>(shard.bos_id()));
      if (inner != end) {
        return absl::DataLossError(fmt::format(
            "{}: document {} holds BOS {} inside it, at position {}: every document starts with BOS and "
            "holds "
            "it nowhere else (corrupt shard, or its writer did not encode with the ordinary encoder)",
            shard.path(), d, shard.bos_id(), inner - tokens.begin()));
      }
    }
  }
  if (shard.stored_checksum() && *shard.stored_checksum() != scan.checksum) {
    return absl::DataLossError(fmt::format(
        "{}: token checksum {:#018x} does not match the stored {:#018x}: the token data is corrupt (bit rot, "
        "a partial copy?); re-create or re-copy the shard",
        shard.path(), scan.checksum, *shard.stored_checksum()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TokenShard::copy_document_prefix(int64_t doc, int64_t count, int32_t* out) const {
  return bytes_per_token() == 2 ? copy_document_prefix_typed<uint16_t>(*this, doc, count, out)
                                : copy_document_prefix_typed<uint32_t>(*this, doc, count, out);
}

absl::Status TokenShard::verify_tokens() const {
  return bytes_per_token() == 2 ? verify_tokens_typed<uint16_t>(*this) : verify_tokens_typed<uint32_t>(*this);
}

}  // namespace nanoforge
