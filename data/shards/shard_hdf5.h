// nanoforge's token shard file, HDF5 (format version 1; docs/data.md is the specification for other tools):
// /tokens (uint16, or uint32 past 65536 ids; contiguous) and /doc_offsets (int64, doc_count + 1 values:
// document d is tokens[offsets[d], offsets[d + 1]), each starting with BOS); root attributes format,
// format_version, vocab_size, bos_id, tokenizer_hash, token_count, doc_count, token_checksum
// (data/shards/shard_token_scan.h). Every object starts on a 4096-byte boundary, so the reader maps /tokens
// straight from the file.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "data/shards/shard.h"

namespace nanoforge {

inline constexpr char kShardFormatName[] = "nanoforge-token-shard";
inline constexpr int64_t kShardFormatVersion = 1;
inline constexpr char kShardTokensDataset[] = "/tokens";
inline constexpr char kShardOffsetsDataset[] = "/doc_offsets";
inline constexpr int64_t kShardAlignmentBytes = 4096;  // a page: mapped datasets start page-aligned
// Largest vocabulary stored as uint16 tokens.
inline constexpr int64_t kShardMaxUint16Vocab = 65536;

// Opens a nanoforge HDF5 shard: checks attributes, dataset types and extents against the attributes and the
// file size, maps both datasets when they are contiguous, aligned and little-endian (else reads them into
// memory, e.g. a shard that another tool wrote chunked), then validate_shard_structure and, when asked,
// the full token check.
absl::StatusOr<TokenShard> open_hdf5_shard(const std::string& path, const ShardOpenOptions& options);

}  // namespace nanoforge
