// What flash_attention_forward.cu and flash_attention_backward.cu share: tiles of heads in shared memory
// (kernels/cuda/mma_tiles.cuh's swizzled layout), filled by cp.async, and the warp-level tensor-core steps
// on them: mma.sync m16n8k16 (bf16 in, fp32 accumulators) fed by ldmatrix. One code path for sm_90 (H200) and
// sm_121 (GB10, which has no wgmma/TMA). An m16n8 accumulator holds, in lane 4g + t, rows g and g + 8 and
// columns 2t, 2t + 1: the same places as the A operand of the next mma, so scores and probabilities go from
// one product to the next in registers (to_a_operand). Tiling, passes and budgets: docs/kernels.md.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/mma_tiles.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/head_slice.h"
#include "kernels/tensor.h"

namespace nanoforge::cuda::flash {

using tiles::BF16;

using tiles::allow_shared_bytes;
using tiles::kChunkElements;
using tiles::kMaxSharedBytes;
using tiles::kMmaColumns;
using tiles::kMmaDepth;
using tiles::kMmaRows;
using tiles::load_a;
using tiles::load_b_from_columns;
using tiles::load_b_from_rows;
using tiles::mma;
using tiles::swizzled;
using tiles::to_a_operand;
using tiles::zero;

inline constexpr int kKeyTile = 64;  // rows of a backward tile (keys or queries); the forward picks its own

inline constexpr float kLog2E = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

template <int kHeadDim>
inline constexpr int kTileBytes = kHeadDim* kKeyTile * 2;  // a (64, D) bf16 tile

// Block-wide: issues cp.async copies of rows [row0, row0 + kRows) of head `head` of a (B, T, ·, kHeadDim)
// bf16 tensor whose positions are row_heads heads apart (a head slice's are its whole tensor's), batch
// `batch`, into a swizzled (kRows, kHeadDim) tile; rows at or past `seq` are zero-filled (finite, so that a
// masked probability of 0 times them stays 0). The caller commits and waits.
template <int kHeadDim, int kRows, int kThreads>
__device__ inline void load_tile_async(BF16* tile, const BF16* tensor, int batch, int row0, int seq,
                                       int row_heads, int head) {
  constexpr int kChunks = kHeadDim / kChunkElements;
  static_assert(kRows * kChunks % kThreads == 0, "every thread issues the same number of copies");
  // A rolled loop: unrolled, the compiler keeps every copy's addresses live across the key-tile loop.
#pragma unroll 1
  for (int i = 0; i < kRows * kChunks / kThreads; ++i) {
    const int index = static_cast<int>(threadIdx.x) + i * kThreads;
    const int row = index / kChunks;
    const int chunk = index % kChunks;
    const int t = row0 + row;
    const bool inside = t < seq;
    // A row past the sequence copies nothing, but its source address must still be valid: row 0's.
    const int64_t offset =
        ((static_cast<int64_t>(batch) * seq + (inside ? t : 0)) * row_heads + head) * kHeadDim + chunk * 8;
    ptx::cp_async_16(tile + swizzled<kHeadDim>(row, chunk), tensor + offset, inside);
  }
}

// Block-wide: entries [row0, row0 + kRows) of one (batch, head) row of a (B, heads, T) f32 tensor into
// shared `rows`, zeros at or past `seq`. Plain loads (a row of T floats is not 16-byte aligned for every T);
// the caller orders them with the barrier that follows its next cp.async wait.
template <int kRows, int kThreads>
__device__ inline void load_row_values(float* rows, const float* tensor, int batch, int head, int heads,
                                       int row0, int seq) {
  for (int i = static_cast<int>(threadIdx.x); i < kRows; i += kThreads) {
    const int t = row0 + i;
    rows[i] = t < seq ? tensor[(static_cast<int64_t>(batch) * heads + head) * seq + t] : 0.0f;
  }
}

// Warp-wide: acc (16 kRowBlocks, kColumns) += A B, A = rows a_row0 .. a_row0 + 16 kRowBlocks - 1 of a_tile
// (all kHeadDim columns), B[k][n] = b_tile[n0 + n][k]: a block of Q K^T, dO V^T (kColumns keys from n0) or
// of their transposes. Each B fragment loaded serves all kRowBlocks row blocks.
template <int kHeadDim, int kRowBlocks, int kColumns>
__device__ inline void mma_rows_by_rows(float (&acc)[kRowBlocks][kColumns / kMmaColumns][4],
                                        const BF16* a_tile, int a_row0, const BF16* b_tile, int n0) {
  // Unrolled by two only: the accumulators are indexed by m and n alone, and a full unroll lets the compiler
  // hold every step's fragments at once (the forward at kHeadDim 128 then spills).
#pragma unroll 2
  for (int k0 = 0; k0 < kHeadDim; k0 += kMmaDepth) {
    uint32_t a[kRowBlocks][4];
#pragma unroll
    for (int m = 0; m < kRowBlocks; ++m)
      load_a<kHeadDim>(a[m], a_tile, a_row0 + m * kMmaRows, k0);
#pragma unroll
    for (int n = 0; n < kColumns / kMmaColumns; n += 2) {
      uint32_t b[4];
      load_b_from_rows<kHeadDim>(b, b_tile, n0 + n * kMmaColumns, k0);
#pragma unroll
      for (int m = 0; m < kRowBlocks; ++m) {
        mma(acc[m][n], a[m], b[0], b[1]);
        mma(acc[m][n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// Warp-wide: acc (16 kRowBlocks, kHeadDim) += A B, A = the probabilities or score gradients held in the
// accumulators `scores` (16 kRowBlocks rows x kDepth columns), rounded to bf16, B = rows k0 .. k0 + kDepth -
// 1 of a row-major (., kHeadDim) tile: P V, P^T dO, dS^T Q, dS K.
template <int kHeadDim, int kRowBlocks, int kDepth>
__device__ inline void mma_scores_by_tile(float (&acc)[kRowBlocks][kHeadDim / kMmaColumns][4],
                                          const float (&scores)[kRowBlocks][kDepth / kMmaColumns][4],
                                          const BF16* tile, int k0) {
#pragma unroll
  for (int step = 0; step < kDepth / kMmaDepth; ++step) {
    uint32_t a[kRowBlocks][4];
#pragma unroll
    for (int m = 0; m < kRowBlocks; ++m)
      to_a_operand(a[m], scores[m][2 * step], scores[m][2 * step + 1]);
#pragma unroll
    for (int n = 0; n < kHeadDim / kMmaColumns; n += 2) {
      uint32_t b[4];
      load_b_from_columns<kHeadDim>(b, tile, k0 + step * kMmaDepth, n * kMmaColumns);
#pragma unroll
      for (int m = 0; m < kRowBlocks; ++m) {
        mma(acc[m][n], a[m], b[0], b[1]);
        mma(acc[m][n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// Warp-wide: writes a warp's (16, kHeadDim) accumulators times row_factor[half] (half 0: row g, 1: row
// g + 8), rows row0 + 0..15, to head `head` of a (B, T, heads, kHeadDim) bf16 tensor, skipping rows at or
// past `seq`. Each lane stores its bf16 pairs; the four lanes of a row write 16 contiguous bytes per n-block.
template <int kHeadDim>
__device__ inline void store_rows(BF16* tensor, const float (&acc)[kHeadDim / kMmaColumns][4],
                                  const float (&row_factor)[2], int batch, int row0, int seq, int row_heads,
                                  int head) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int t = row0 + lane / 4 + half * 8;
    if (t >= seq) continue;
    BF16* row =
        tensor + ((static_cast<int64_t>(batch) * seq + t) * row_heads + head) * kHeadDim + 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < kHeadDim / kMmaColumns; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(row + n * kMmaColumns) =
          __floats2bfloat162_rn(acc[n][2 * half] * row_factor[half], acc[n][2 * half + 1] * row_factor[half]);
    }
  }
}

// Whether query t sees key j: t - window <= j <= t.
__device__ inline bool visible(int t, int j, int window) {
  return j <= t && t - j <= window;
}

// Whether every query of [query0, query0 + queries) sees every key of [key0, key0 + keys): the tile needs
// no mask (keys past the sequence only occur in tiles that reach past the diagonal, which are masked).
__device__ inline bool all_visible(int query0, int queries, int key0, int keys, int window) {
  return key0 + keys - 1 <= query0 && query0 + queries - 1 - key0 <= window;
}

// Whether no query of [query0, query0 + queries) sees any key of [key0, key0 + keys).
__device__ inline bool none_visible(int query0, int queries, int key0, int keys, int window) {
  return key0 > query0 + queries - 1 || query0 - (key0 + keys - 1) > window;
}

// ---- host side ----

// An attention call's sizes, checked to fit the kernels' int indices and grid limits. window is clamped to
// seq (every larger window is plain causal).
struct AttentionShape {
  int batch, seq, heads, kv_heads, head_dim, window;
};

// How many heads apart consecutive positions of each tensor lie: the row strides of the tile loads and
// stores. A head slice's are its whole tensor's (q, k, v and their gradients inside the fused projection's
// output and its gradient); out and d_out are dense (heads).
struct RowHeads {
  int q, k, v, out, d_q, d_k, d_v;
};

inline void check_aligned(const void* data, const char* op, const char* name) {
  NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(data) % 16 == 0,
                  "{} on CUDA: {} must start on a 16-byte boundary (the kernels load 16-byte chunks), got {}",
                  op, name, data);
}

// The row stride of a slice, in heads, checked to fit the kernels' int index math.
inline int row_heads(const HeadSlice& t, const char* op, const char* name) {
  NANOFORGE_CHECK(t.row_heads() <= 65535, "{} on CUDA: {} {} has more than 65535 heads a position", op, name,
                  t.describe());
  return static_cast<int>(t.row_heads());
}

// The checks both passes make on q, k, v (B, T, H|Hkv, D) bf16 (head slices), out (B, T, H, D) bf16 and lse
// (B, H, T) f32, before any CUDA call.
inline AttentionShape check_attention(const HeadSlice& q, const HeadSlice& k, const HeadSlice& v,
                                      const TensorView& out, const TensorView& lse, int64_t window,
                                      const char* op) {
  check_tensor(q.whole, DType::kBF16, op, "q");
  check_tensor(k.whole, DType::kBF16, op, "k");
  check_tensor(v.whole, DType::kBF16, op, "v");
  check_tensor(out, DType::kBF16, op, "out");
  check_tensor(lse, DType::kF32, op, "lse");
  check_rank(out, 4, op, "out");
  check_same_shape(k, v, op);
  check_same_shape(q, out, op);
  const int64_t batch = q.batch(), seq = q.seq(), heads = q.heads(), kv_heads = k.heads();
  const int64_t head_dim = q.head_dim();
  NANOFORGE_CHECK(k.batch() == batch && k.seq() == seq && k.head_dim() == head_dim && kv_heads > 0 &&
                      heads % kv_heads == 0,
                  "{} on CUDA: k {} does not match q {} (heads must be a multiple of kv heads)", op,
                  k.describe(), q.describe());
  NANOFORGE_CHECK(lse.numel() == batch * heads * seq, "{} on CUDA: lse {} must be ({}, {}, {})", op,
                  lse.describe(), batch, heads, seq);
  NANOFORGE_CHECK(head_dim == 32 || head_dim == 64 || head_dim == 128,
                  "{} on CUDA: head dim {} is not supported; the flash attention kernels are built for head "
                  "dims 32, 64 and 128",
                  op, head_dim);
  NANOFORGE_CHECK(window >= 0, "{} on CUDA: negative window {}", op, window);
  // Grid: x = row tiles, y = heads, z = batch (at most 65535 each for y and z); int row indices with room
  // for a tile past the end.
  NANOFORGE_CHECK(seq <= std::numeric_limits<int>::max() - 2 * kKeyTile && heads <= 65535 && batch <= 65535,
                  "{} on CUDA: q {} is too large for one launch (T < 2^31, H and B at most 65535)", op,
                  q.describe());
  check_aligned(q.data(), op, "q");
  check_aligned(k.data(), op, "k");
  check_aligned(v.data(), op, "v");
  check_aligned(out.data, op, "out");
  return {static_cast<int>(batch),    static_cast<int>(seq),      static_cast<int>(heads),
          static_cast<int>(kv_heads), static_cast<int>(head_dim), static_cast<int>(std::min(window, seq))};
}

inline int tile_count(int seq, int rows_per_tile) {
  return (seq + rows_per_tile - 1) / rows_per_tile;
}

// Calls launch(std::integral_constant<int, D>{}) for the head dim D (32, 64 or 128, checked above; 32 is the
// small test models').
template <class Launch>
void with_head_dim(int head_dim, Launch&& launch) {
  if (head_dim == 32) {
    launch(std::integral_constant<int, 32>{});
  } else if (head_dim == 64) {
    launch(std::integral_constant<int, 64>{});
  } else {
    launch(std::integral_constant<int, 128>{});
  }
}

}  // namespace nanoforge::cuda::flash
