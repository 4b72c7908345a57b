// Grid sizes for the CUDA launchers. Kernels that loop (grid-stride over elements, or over rows with a
// warp or block each) cap their grid at a fixed block count and stride over what lies beyond it, so the
// grid depends only on the shape, never on the GPU: a kernel that reduces across its grid adds in an order
// the shape alone fixes. The flat elementwise kernels (for_each_pack in vector_pack.cuh) run
// kElementwiseThreads per block.
#pragma once

#include <algorithm>
#include <cstdint>

namespace nanoforge::cuda {

// Threads per block of the flat elementwise kernels: a block size every architecture schedules well.
inline constexpr int kElementwiseThreads = 256;
// Beyond this many blocks the loops stride instead: an H200 runs 132 SMs x 8 blocks of 256 threads at once,
// so this is about 8 waves; more blocks would only add scheduling work.
inline constexpr int64_t kMaxBlocks = 8192;

// Blocks of `items_per_block` work items (threads, warps or rows) covering `items`: at least 1, at most
// `max_blocks` (the kernel loops over the items beyond).
inline int blocks_for(int64_t items, int64_t items_per_block, int64_t max_blocks = kMaxBlocks) {
  return static_cast<int>(
      std::clamp<int64_t>((items + items_per_block - 1) / items_per_block, 1, max_blocks));
}

// The grid of a flat elementwise kernel over `numel` elements, one pack of `count` elements per thread.
inline int elementwise_blocks(int64_t numel, int count, int64_t max_blocks = kMaxBlocks) {
  return blocks_for((numel + count - 1) / count, kElementwiseThreads, max_blocks);
}

}  // namespace nanoforge::cuda
