// An independent count of the attention's tile pairs for the performance-model tests: pairs (i, j) with
// 0 <= i - j <= w/64 over n tiles, summed along the diagonals — the sum over the offsets d of (n - d), a
// different count from the kernel's per-query-tile loop that cost::attention_tile_pairs follows.
#pragma once

#include <algorithm>
#include <cstdint>

namespace nanoforge {

inline int64_t pairs_by_diagonals(int64_t tiles, int64_t window_tiles) {
  int64_t pairs = 0;
  for (int64_t d = 0; d <= std::min(window_tiles, tiles - 1); ++d)
    pairs += tiles - d;
  return pairs;
}

}  // namespace nanoforge
