// BpeRanks::merge: tiktoken's linear scan on a stack array for short pieces (almost all of them), and the
// same merge order through a min-heap over (rank, position) with a linked list for long ones, where the
// linear scan would be quadratic (long runs of spaces or of one letter).
#include "data/tokenizer/bpe_merge.h"

#include <algorithm>
#include <queue>

namespace nanoforge {
namespace {

// Pieces up to this many bytes are merged by the linear scan on the stack.
constexpr size_t kShortPieceBytes = 128;

}  // namespace

BpeRanks::BpeRanks(const std::vector<std::string_view>& tokens_by_rank) {
  byte_ids_.fill(-1);
  absl::flat_hash_map<std::string_view, int32_t> ids;
  ids.reserve(tokens_by_rank.size());
  for (size_t rank = 0; rank < tokens_by_rank.size(); ++rank) {
    ids.emplace(tokens_by_rank[rank], static_cast<int32_t>(rank));
    if (tokens_by_rank[rank].size() == 1)
      byte_ids_[static_cast<unsigned char>(tokens_by_rank[rank][0])] = static_cast<int32_t>(rank);
  }
  for (size_t rank = 0; rank < tokens_by_rank.size(); ++rank) {
    const std::string_view token = tokens_by_rank[rank];
    for (size_t split = 1; split < token.size(); ++split) {
      const auto left = ids.find(token.substr(0, split));
      if (left == ids.end()) continue;
      const auto right = ids.find(token.substr(split));
      if (right == ids.end()) continue;
      pair_ids_.emplace(pair_key(left->second, right->second), static_cast<int32_t>(rank));
    }
  }
}

void BpeRanks::merge(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() <= kShortPieceBytes) {
    merge_short(piece, out);
  } else {
    merge_long(piece, out);
  }
}

void BpeRanks::merge_short(std::string_view piece, std::vector<int32_t>& out) const {
  int32_t ids[kShortPieceBytes];
  int32_t ranks[kShortPieceBytes];  // ranks[i]: merged id of (ids[i], ids[i+1])
  size_t n = piece.size();
  for (size_t i = 0; i < n; ++i)
    ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  for (size_t i = 0; i + 1 < n; ++i)
    ranks[i] = merged_id(ids[i], ids[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoMerge) break;
    ids[best] = ranks[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
    }
    --n;
    if (best + 1 < n) ranks[best] = merged_id(ids[best], ids[best + 1]);
    if (best > 0) ranks[best - 1] = merged_id(ids[best - 1], ids[best]);
  }
  out.insert(out.end(), ids, ids + n);
}

void BpeRanks::merge_long(std::string_view piece, std::vector<int32_t>& out) const {
  // Parts are linked by next/prev over byte positions; a part is alive while it has not been merged into
  // its left neighbour. Heap entries (rank, position) go stale when either part of the pair changes; an
  // entry is current when its position is alive and its rank equals the pair's current rank (a pair's rank
  // identifies its bytes, which only ever grow).
  const size_t n = piece.size();
  std::vector<int32_t> ids(n), ranks(n, kNoMerge);
  std::vector<uint32_t> next(n), prev(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
    next[i] = static_cast<uint32_t>(i + 1);
    prev[i] = static_cast<uint32_t>(i) - 1;  // wraps for i = 0: never read
  }
  using Entry = std::pair<int32_t, uint32_t>;  // (rank, position): smallest first, leftmost among equals
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t i = 0; i + 1 < n; ++i) {
    ranks[i] = merged_id(ids[i], ids[i + 1]);
    if (ranks[i] != kNoMerge) heap.emplace(ranks[i], static_cast<uint32_t>(i));
  }
  while (!heap.empty()) {
    const auto [rank, position] = heap.top();
    heap.pop();
    if (!alive[position] || ranks[position] != rank) continue;
    const uint32_t removed = next[position];
    ids[position] = rank;
    alive[removed] = 0;
    next[position] = next[removed];
    if (next[position] < n) {
      prev[next[position]] = position;
      ranks[position] = merged_id(ids[position], ids[next[position]]);
      if (ranks[position] != kNoMerge) heap.emplace(ranks[position], position);
    } else {
      ranks[position] = kNoMerge;
    }
    if (position > 0) {
      const uint32_t left = prev[position];
      ranks[left] = merged_id(ids[left], ids[position]);
      if (ranks[left] != kNoMerge) heap.emplace(ranks[left], left);
    }
  }
  for (size_t i = 0; i < n; i = next[i])
    out.push_back(ids[i]);
}

}  // namespace nanoforge
