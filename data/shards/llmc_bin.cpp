// llm.c .bin reader and writer. The reader maps the file once; the tokens are used in place (the header is
// 1024 bytes, so they are aligned), and the document offsets are the BOS positions found by one scan.
#include "data/shards/llmc_bin.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "data/shards/shard_token_scan.h"
#include "support/mapped_file.h"
#include "support/output_path.h"
#include "support/status.h"

namespace nanoforge {

bool is_llmc_magic(int32_t magic) {
  return magic == kLlmcMagicUint16 || magic == kLlmcMagicUint32;
}

namespace {

template <class Token>
absl::Status find_documents(TokenShardParts& parts, int64_t vocab_size) {
  const std::span<const Token> tokens(static_cast<const Token*>(parts.tokens),
                                      static_cast<size_t>(parts.token_count));
  const TokenScanResult scan = scan_tokens(tokens, vocab_size);
  if (scan.first_out_of_vocab >= 0) {
    return absl::DataLossError(fmt::format(
        "{}: token {} at position {} is outside the vocabulary (vocab_size {}): wrong --vocab for this data, "
        "or a corrupt file",
        parts.path, scan.out_of_vocab_value, scan.first_out_of_vocab, vocab_size));
  }
  auto offsets = std::make_shared<std::vector<int64_t>>();
  find_token_positions(tokens, static_cast<uint32_t>(parts.bos_id), *offsets);
  if (offsets->empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: no BOS token (id {}) among its {} tokens, so no documents: is the BOS id right? (GPT-2's "
        "<|endoftext|> is 50256)",
        parts.path, parts.bos_id, parts.token_count));
  }
  parts.tokens_outside_documents = offsets->front();
  parts.doc_count = static_cast<int64_t>(offsets->size());
  offsets->push_back(parts.token_count);
  parts.doc_offsets = offsets->data();
  parts.offsets_owner = std::move(offsets);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenShard> open_llmc_bin(const std::string& path, const ShardOpenOptions& options) {
  const ShardExpectations& expect = options.expect;
  if (!expect.vocab_size || !expect.bos_id) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: llm.c .bin shards record no vocabulary size or BOS id: give both (GPT-2: vocab 50257, BOS "
        "50256)",
        path));
  }
  if (expect.tokenizer_hash) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: llm.c .bin shards record no tokenizer, so the expected tokenizer hash {} cannot be checked; use "
        "them without a tokenizer check",
        path, *expect.tokenizer_hash));
  }
  NANOFORGE_ASSIGN_OR_RETURN(MappedFile mapped_file, MappedFile::open(path));
  auto mapping = std::make_shared<const MappedFile>(std::move(mapped_file));
  const int64_t file_bytes = mapping->size_bytes();
  if (file_bytes < kLlmcHeaderBytes) {
    return absl::DataLossError(fmt::format("{}: truncated: {} bytes, shorter than llm.c's {}-byte header",
                                           path, file_bytes, kLlmcHeaderBytes));
  }
  std::array<int32_t, 3> header{};
  std::memcpy(header.data(), mapping->bytes().data(), sizeof(header));
  const int32_t magic = header[0], version = header[1], count = header[2];
  int bytes_per_token = 0;
  if (magic == kLlmcMagicUint16 && version == kLlmcVersionUint16) {
    bytes_per_token = 2;
  } else if (magic == kLlmcMagicUint32 && version == kLlmcVersionUint32) {
    bytes_per_token = 4;
  } else if (is_llmc_magic(magic)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: llm.c magic {} with version {}: llm.c writes version {} (uint16 tokens) with magic {} and "
        "version {} (uint32 tokens) with magic {}",
        path, magic, version, kLlmcVersionUint16, kLlmcMagicUint16, kLlmcVersionUint32, kLlmcMagicUint32));
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "{}: bad magic number {} (llm.c shards start with {} or {}): not an llm.c shard, or corrupt", path,
        magic, kLlmcMagicUint16, kLlmcMagicUint32));
  }
  if (count < 0) {
    return absl::DataLossError(
        fmt::format("{}: negative token count {} in the header (corrupt)", path, count));
  }
  const int64_t expected_bytes = kLlmcHeaderBytes + int64_t{count} * bytes_per_token;
  if (file_bytes < expected_bytes) {
    return absl::DataLossError(fmt::format(
        "{}: truncated: the header says {} tokens ({} bytes with the header) but the file has {} bytes; "
        "re-create or re-copy it",
        path, count, expected_bytes, file_bytes));
  }
  if (file_bytes > expected_bytes) {
    return absl::DataLossError(fmt::format(
        "{}: {} bytes after the {} tokens the header announces (expected {} bytes in all): corrupt header or "
        "wrong file",
        path, file_bytes - expected_bytes, count, expected_bytes));
  }
  if (count == 0) {
    return absl::InvalidArgumentError(fmt::format("{}: empty shard (0 tokens): nothing to train on", path));
  }

  TokenShardParts parts;
  parts.path = path;
  parts.format = ShardFormat::kLlmcBin;
  parts.vocab_size = *expect.vocab_size;
  parts.bos_id = *expect.bos_id;
  parts.bytes_per_token = bytes_per_token;
  parts.token_count = count;
  parts.tokens = mapping->bytes().data() + kLlmcHeaderBytes;
  parts.tokens_memory_mapped = true;
  parts.token_owner = mapping;
  if (parts.bos_id < 0 || parts.bos_id >= parts.vocab_size) {
    return absl::InvalidArgumentError(
        fmt::format("{}: BOS id {} is outside the vocabulary [0, {})", path, parts.bos_id, parts.vocab_size));
  }
  mapping->advise(MappedFile::Access::kSequential);
  absl::Status found = bytes_per_token == 2 ? find_documents<uint16_t>(parts, parts.vocab_size)
                                            : find_documents<uint32_t>(parts, parts.vocab_size);
  mapping->advise(MappedFile::Access::kNormal);
  NANOFORGE_RETURN_IF_ERROR(found);
  ShardExpectations structure_only = expect;
  structure_only.tokenizer_hash.reset();
  NANOFORGE_RETURN_IF_ERROR(validate_shard_structure(parts, structure_only));
  return TokenShard(std::move(parts));
}

absl::Status write_llmc_bin(const std::string& path, std::span<const int32_t> tokens, LlmcTokenWidth width) {
  const bool narrow = width == LlmcTokenWidth::kUint16;
  if (tokens.size() >= (size_t{1} << 31)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} tokens; llm.c shards hold fewer than 2^31", path, tokens.size()));
  }
  std::array<int32_t, kLlmcHeaderInts> header{};
  header[0] = narrow ? kLlmcMagicUint16 : kLlmcMagicUint32;
  header[1] = narrow ? kLlmcVersionUint16 : kLlmcVersionUint32;
  header[2] = static_cast<int32_t>(tokens.size());
  const std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return absl::PermissionDeniedError(fmt::format("{}: cannot create", temporary));
    file.write(reinterpret_cast<const char*>(header.data()), sizeof(header));
    for (int32_t id : tokens) {
      if (id < 0 || (narrow && id > 65535)) {
        file.close();
        std::filesystem::remove(temporary);
        return absl::InvalidArgumentError(
            fmt::format("{}: token {} does not fit the {} format", path, id, narrow ? "uint16" : "uint32"));
      }
      if (narrow) {
        const auto value = static_cast<uint16_t>(id);
        file.write(reinterpret_cast<const char*>(&value), sizeof(value));
      } else {
        const auto value = static_cast<uint32_t>(id);
        file.write(reinterpret_cast<const char*>(&value), sizeof(value));
      }
    }
    if (!file.flush()) {
      file.close();
      std::filesystem::remove(temporary);
      return absl::DataLossError(fmt::format("{}: write failed (disk full?)", temporary));
    }
  }
  return rename_into_place(temporary, path);
}

}  // namespace nanoforge
