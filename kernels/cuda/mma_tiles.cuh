// The warp-level tensor-core building blocks that our mma.sync kernels share (the flash attention's and the
// MLP GEMM's): bf16 tiles in shared memory with an XOR swizzle instead of padding, their ldmatrix fragments
// as the A and B operands of mma.sync m16n8k16 (kernels/cuda/mma_ptx.cuh), accumulators back to operands,
// and the shared-memory opt-in. One code path for sm_90 (H200) and sm_121 (GB10, no wgmma or TMA).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/mma_ptx.cuh"
#include "kernels/cuda/reductions.cuh"

namespace nanoforge::cuda::tiles {

using BF16 = __nv_bfloat16;

inline constexpr int kMmaRows = 16;       // m of m16n8k16: the rows one warp's fragment covers
inline constexpr int kMmaColumns = 8;     // n
inline constexpr int kMmaDepth = 16;      // k
inline constexpr int kChunkElements = 8;  // bf16 per 16-byte chunk (one cp.async, one ldmatrix row)
// The largest block the GB10 allows (99 KB of its SM's shared memory), so one build runs on both GPUs.
inline constexpr int kMaxSharedBytes = 99 * 1024;

// A (rows, kRowElements) bf16 tile in shared memory, rows of kRowElements / 8 16-byte chunks without padding;
// chunk c of row r is stored at chunk c ^ swizzle(r), swizzle(r) = r % 8 (rows of 8 or 16 chunks) or
// (r / 2) % 4 (rows of 4 chunks: head dim 32, a GEMM's 32-deep k tile). The 8 rows that one ldmatrix matrix
// reads (same logical chunk, consecutive rows) then fall in 8 different 16-byte bank groups: no bank
// conflicts, and no padding bytes, which the 99 KB budget has no room for. (fragment_offset computes the same
// for ldmatrix's lanes.)
template <int kRowElements>
__device__ inline int swizzle(int row) {
  static_assert(kRowElements == 32 || kRowElements % (8 * kChunkElements) == 0,
                "the swizzle stays within a row");
  return kRowElements == 32 ? row / 2 % 4 : row % 8;
}

template <int kRowElements>
__device__ inline int swizzled(int row, int chunk) {
  return row * kRowElements + ((chunk ^ swizzle<kRowElements>(row)) * kChunkElements);
}

// The element offset, in a swizzled tile, of the 16-byte row that this lane passes to an ldmatrix x4 whose
// four 8x8 matrices start at row row0 + (i & row_bit) * 8 and column column0 + (i & column_bit) * 8 for
// matrix i = lane / 8 (row0 a multiple of 8, column0 of 16). With row % 8 = lane % 8 the swizzle is an XOR
// of column0 with a per-lane constant: one instruction per fragment, no per-fragment address register.
template <int kRowElements, int kRowBit, int kColumnBit>
__device__ inline int fragment_offset(int row0, int column0) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int matrix = lane / 8;
  const int row = row0 + lane % 8 + ((matrix & kRowBit) != 0 ? 8 : 0);
  const int lane_column =
      ((matrix & kColumnBit) != 0 ? 8 : 0) ^ (swizzle<kRowElements>(lane % 8) * kChunkElements);
  return row * kRowElements + (column0 ^ lane_column);
}

// Warp-wide: the A operand (16 rows from row0, 16 columns from column0) of a swizzled row-major tile:
// matrix i covers rows row0 + (i % 2) * 8 .., columns column0 + (i / 2) * 8 ..: a[0..3].
template <int kRowElements>
__device__ inline void load_a(uint32_t (&a)[4], const BF16* tile, int row0, int column0) {
  ptx::ldmatrix_x4(a, tile + fragment_offset<kRowElements, 1, 2>(row0, column0));
}

// Warp-wide: the B operands of two n-blocks, B[k][n] = tile[n][k] (the tile's rows are B's columns: K in
// Q K^T, W in x W^T): b[0..1] for columns n0 .. n0 + 7 and b[2..3] for n0 + 8 .., k = k0 .. k0 + 15. Matrix i
// covers tile rows n0 + (i / 2) * 8 .., columns k0 + (i % 2) * 8 ..
template <int kRowElements>
__device__ inline void load_b_from_rows(uint32_t (&b)[4], const BF16* tile, int n0, int k0) {
  ptx::ldmatrix_x4(b, tile + fragment_offset<kRowElements, 2, 1>(n0, k0));
}

// Warp-wide: the B operands of two n-blocks, B[k][n] = tile[k][n] (a row-major (k, n) tile: V in P V, W in
// d_y W), through ldmatrix .trans: b[0..1] for columns n0 .. n0 + 7 and b[2..3] for n0 + 8 ..,
// k = k0 .. k0 + 15. Matrix i covers tile rows k0 + (i % 2) * 8 .., columns n0 + (i / 2) * 8 ..
template <int kRowElements>
__device__ inline void load_b_from_columns(uint32_t (&b)[4], const BF16* tile, int k0, int n0) {
  ptx::ldmatrix_x4_trans(b, tile + fragment_offset<kRowElements, 1, 2>(k0, n0));
}

// Two floats as the bf16 pair of one operand register (the lower column in the low half).
__device__ inline uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  uint32_t bits;
  std::memcpy(&bits, &pair, sizeof(bits));
  return bits;
}

// The A operand (16 rows x 16 columns) from the accumulators of two neighbouring n-blocks (columns
// 16j .. 16j + 7 and 16j + 8 .. 16j + 15), rounded to bf16: a[0] = (g, 2t..), a[1] = (g + 8, 2t..),
// a[2] = (g, 2t + 8..), a[3] = (g + 8, 2t + 8..).
__device__ inline void to_a_operand(uint32_t (&a)[4], const float (&left)[4], const float (&right)[4]) {
  a[0] = pack_bf16(left[0], left[1]);
  a[1] = pack_bf16(left[2], left[3]);
  a[2] = pack_bf16(right[0], right[1]);
  a[3] = pack_bf16(right[2], right[3]);
}

// acc += A B for one m16n8k16 step.
__device__ inline void mma(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint32_t b[2] = {b0, b1};
  ptx::mma_m16n8k16_bf16(acc, a, b, acc);
}

// acc += A B for one m16n8k32 step on FP8 codes (B e4m3, A e4m3 or e5m2): the same fragment registers as a
// m16n8k16 step on bf16 (mma_ptx.cuh), so a tile of codes loads as a 16-bit tile of half the width.
template <bool kAIsE5m2>
__device__ inline void mma_fp8(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint32_t b[2] = {b0, b1};
  ptx::mma_m16n8k32_fp8<kAIsE5m2>(acc, a, b, acc);
}

// Zeroes a warp's accumulators.
template <int kRowBlocks, int kBlocks>
__device__ inline void zero(float (&acc)[kRowBlocks][kBlocks][4]) {
#pragma unroll
  for (int m = 0; m < kRowBlocks; ++m) {
#pragma unroll
    for (int n = 0; n < kBlocks; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[m][n][i] = 0.0f;
    }
  }
}

// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KB one must opt in).
template <class Kernel>
void allow_shared_bytes(Kernel* kernel, int bytes) {
  NANOFORGE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

}  // namespace nanoforge::cuda::tiles
