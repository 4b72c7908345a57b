// Deterministic parallel sums for parameter gradients that reduce over every token (lambdas, gates).
// The item range is cut into a fixed number of blocks whatever the thread count, each block is summed in
// double by one thread, and the block sums are added in block order: the result is bitwise the same for 1
// or 64 threads, which exact CPU resume relies on.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "support/check.h"

namespace nanoforge::cpu {

inline constexpr int kOrderedSumBlocks = 64;
inline constexpr int kOrderedSumMaxValues = 384;  // 12 gate channels x 32 kv heads

// add_block(begin, end, partial) adds the contributions of items [begin, end) into partial[0 .. values).
// Returns the totals in `totals[0 .. values)`.
template <class AddBlock>
void ordered_sums(int64_t items, int values, double* totals, AddBlock&& add_block) {
  NANOFORGE_CHECK(values <= kOrderedSumMaxValues, "ordered_sums: {} values exceed the limit {}", values,
                  kOrderedSumMaxValues);
  std::array<std::array<double, kOrderedSumMaxValues>, kOrderedSumBlocks> partials;
  const int64_t block_items = (items + kOrderedSumBlocks - 1) / kOrderedSumBlocks;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < kOrderedSumBlocks; ++block) {
    double* partial = partials[block].data();
    std::fill(partial, partial + values, 0.0);
    const int64_t begin = std::min(items, block * block_items);
    const int64_t end = std::min(items, begin + block_items);
    if (begin < end) add_block(begin, end, partial);
  }
  std::fill(totals, totals + values, 0.0);
  for (int block = 0; block < kOrderedSumBlocks; ++block) {
    for (int v = 0; v < values; ++v)
      totals[v] += partials[block][v];
  }
}

}  // namespace nanoforge::cpu
