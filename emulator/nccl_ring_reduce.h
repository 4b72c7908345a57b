// The emulated NCCL's reductions, with NCCL's numerics rather than the exact sum: a ring over the ranks in
// rank order, where the sum of chunk c (of n equal chunks) starts at rank c + 1 and ends at rank c, each step
// rounded to the data type (bf16 at every hop, as NCCL's bf16 kernels add); ncclAvg of floating types is a
// pre-multiplied sum (each contribution times 1/n in the data type, then the ring sum), of integers a sum
// divided at the end. Real NCCL picks its ring from the topology; rank order is the ring of one machine.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace nanoforge::emulator {

size_t nccl_type_bytes(ncclDataType_t type);  // 0 for a type the emulator does not handle

// The element range of chunk `chunk` when `count` elements are split over `ranks` ring chunks.
struct ChunkRange {
  size_t begin, end;
};
ChunkRange ring_chunk(size_t count, int ranks, int chunk);

// result[i] = the ring reduction of contributions[r][offset + i] over the ranks r, for i in [0, count), where
// element offset + i belongs to ring chunk `ring_chunk_of` of a `total`-element collective. All-reduce
// passes offset 0 and total = count; reduce-scatter passes rank d's output chunk (its elements all start at
// rank d + 1).
void ring_reduce(const unsigned char* const* contributions, int ranks, size_t offset, size_t count,
                 size_t total, ncclDataType_t type, ncclRedOp_t op, unsigned char* result);

}  // namespace nanoforge::emulator
