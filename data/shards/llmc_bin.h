// llm.c / nanoGPT token shards (.bin), so existing tokenized data sets (FineWeb, TinyStories, ... as llm.c's
// dev/data scripts write them) train here unchanged. Layout (llm.c dev/data/data_common.py write_datafile):
// a header of 256 little-endian int32 — [0] magic, [1] version, [2] token count, the rest zero — then the
// tokens. Two (magic, version) pairs exist: (20240520, 1) with uint16 tokens (GPT-2) and (20240801, 7) with
// uint32 tokens (llama-3). The file holds exactly 1024 + count * width bytes. There are no document
// boundaries: every document starts with <|endoftext|>, so documents are the runs that start at each BOS the
// caller names (50256 for GPT-2); tokens before the first BOS belong to no document and are not used.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <span>
#include <string>

#include "data/shards/shard.h"

namespace nanoforge {

inline constexpr int32_t kLlmcMagicUint16 = 20240520;  // GPT-2 shards, version 1
inline constexpr int32_t kLlmcVersionUint16 = 1;
inline constexpr int32_t kLlmcMagicUint32 = 20240801;  // llama-3 shards, version 7
inline constexpr int32_t kLlmcVersionUint32 = 7;
inline constexpr int64_t kLlmcHeaderInts = 256;
inline constexpr int64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;

bool is_llmc_magic(int32_t magic);

// Maps the file, checks magic, version and size, splits documents at options.expect.bos_id, and checks every
// token against options.expect.vocab_size (both are required: the file records neither).
absl::StatusOr<TokenShard> open_llmc_bin(const std::string& path, const ShardOpenOptions& options);

enum class LlmcTokenWidth { kUint16, kUint32 };

// Writes tokens in llm.c's layout (temporary name, then rename), for tests and conversions.
absl::Status write_llmc_bin(const std::string& path, std::span<const int32_t> tokens, LlmcTokenWidth width);

}  // namespace nanoforge
