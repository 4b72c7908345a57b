// tiktoken's byte-pair merge of one piece, on token ids: start from the piece's bytes, repeatedly merge the
// adjacent pair whose concatenation is the token of lowest rank (the leftmost among equals), until no
// adjacent pair concatenates to a token. In tiktoken a token's rank is its id, so "lowest rank" is "lowest
// id of the merged token". tiktoken looks pairs up by their concatenated bytes; BpeRanks precomputes, for
// every token and every split of it into two tokens, (left id, right id) -> id, which is the same relation
// on ids, so no bytes are hashed while merging.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace nanoforge {

class BpeRanks {
 public:
  static constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();

  // tokens_by_rank[r]: the bytes of rank r; must contain every single byte (the caller checks).
  explicit BpeRanks(const std::vector<std::string_view>& tokens_by_rank);

  int32_t byte_id(unsigned char byte) const { return byte_ids_[byte]; }
  // The id of the token that is left's bytes followed by right's, or kNoMerge.
  int32_t merged_id(int32_t left, int32_t right) const {
    const auto it = pair_ids_.find(pair_key(left, right));
    return it == pair_ids_.end() ? kNoMerge : it->second;
  }
  size_t num_pairs() const { return pair_ids_.size(); }

  // Appends the ids of `piece` (any length >= 1) merged as tiktoken does.
  void merge(std::string_view piece, std::vector<int32_t>& out) const;

 private:
  static uint64_t pair_key(int32_t left, int32_t right) {
    return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
  }
  void merge_short(std::string_view piece, std::vector<int32_t>& out) const;
  void merge_long(std::string_view piece, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_ids_{};
  absl::flat_hash_map<uint64_t, int32_t> pair_ids_;
};

}  // namespace nanoforge
