// What flash_attention_forward.cu and flash_attention_backward.cu share: the tiling (64 queries x 64 keys,
// four warps that each own 16 rows of a tile), the shared-memory tile loader, the tensor-core fragments and
// the host-side contract checks.
// Tensor cores are driven through nvcuda::wmma (bf16 16x16x16 fragments, fp32 accumulators), which compiles
// to mma.sync on both sm_90 (H200) and sm_121 (GB10, which has no wgmma/TMA). wmma leaves unspecified which
// lane holds which element of a fragment, so each warp learns it at run time: it loads a 16x16 table of row
// indices and one of column indices into accumulator fragments (FragmentCoordinates). Elementwise work on
// an accumulator (masks, exponentials, rescaling rows, writing results to global memory) then runs in
// registers for whatever layout the compiler uses, with no shared-memory round trip.
#pragma once

#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/tensor.h"

namespace nanoforge::cuda::flash {

using BF16 = __nv_bfloat16;

inline constexpr int kTileRows = 64;  // queries in a query tile, keys in a key tile
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * kWarpSize;
inline constexpr int kFragment = 16;                          // wmma's m = n = k
inline constexpr int kTileFragments = kTileRows / kFragment;  // 16-row (or column) slices of a tile
static_assert(kTileRows / kWarps == kFragment, "each warp owns one fragment-high strip of a tile");

// Shared-memory rows are padded so that consecutive rows start in different banks. The padding keeps every
// row 16-byte aligned and every 16-row block 32-byte aligned, as wmma's loads and stores require.
inline constexpr int kBf16Pad = 8;
inline constexpr int kF32Pad = 4;
template <int kHeadDim>
inline constexpr int kTileStride = kHeadDim + kBf16Pad;    // a (64, D) bf16 tile of Q, K, V or dO
inline constexpr int kStripStride = kTileRows + kBf16Pad;  // a warp's (16, 64) bf16 strip of P or dS
inline constexpr int kScoreStride = kTileRows + kF32Pad;   // a warp's (16, 64) f32 strip of scores
inline constexpr int kStripBytes = kFragment * kStripStride * 2;
inline constexpr int kScoreStripBytes = kFragment * kScoreStride * 4;
inline constexpr int kCoordinateTableBytes = 2 * kFragment * kFragment * 4;
// The largest block the GB10 allows (99 KB of its SM's shared memory), so one build runs on both GPUs.
inline constexpr int kMaxSharedBytes = 99 * 1024;

template <int kHeadDim>
inline constexpr int kTileBytes = kTileRows* kTileStride<kHeadDim> * 2;
// wmma needs leading dimensions that are multiples of 8 bf16 or 4 f32 elements (16 bytes), which also keeps
// the 16-byte tile stores and the float4 score reads aligned.
static_assert(kTileStride<32> % 8 == 0 && kTileStride<64> % 8 == 0 && kTileStride<128> % 8 == 0 && kStripStride % 8 == 0 &&
                  kScoreStride % 4 == 0,
              "wmma leading dimensions must be multiples of 16 bytes");

// Whether every shared-memory region of a kernel starts on a 128-byte boundary (wmma needs 32 bytes).
constexpr bool regions_aligned(std::initializer_list<int> offsets) {
  for (const int offset : offsets) {
    if (offset % 128 != 0) return false;
  }
  return true;
}
// The per-warp strips are laid out back to back after whole tiles, so their sizes must keep that alignment.
static_assert(regions_aligned({kTileBytes<32>, kTileBytes<64>, kTileBytes<128>, kStripBytes, kScoreStripBytes}));

inline constexpr float kLog2E = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

using FragmentA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, kFragment, kFragment, kFragment, BF16,
                                         nvcuda::wmma::row_major>;
// B[k][n] read from p[k * ld + n]: a row-major tile used as it is.
using FragmentB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, kFragment, kFragment, kFragment, BF16,
                                         nvcuda::wmma::row_major>;
// B[k][n] read from p[n * ld + k]: the transpose of a row-major tile (K^T in Q K^T).
using FragmentBT = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, kFragment, kFragment, kFragment, BF16,
                                          nvcuda::wmma::col_major>;
using Accumulator = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, kFragment, kFragment, kFragment, float>;
inline constexpr int kAccumulatorElements = Accumulator::num_elements;

// Row and column (0..15) of each element of this lane's Accumulator registers.
struct FragmentCoordinates {
  int row[kAccumulatorElements];
  int col[kAccumulatorElements];
};

// Block-wide: writes the row-index and column-index tables (two 16x16 f32 matrices) that
// read_coordinates() loads. The caller syncs the block between the two.
__device__ inline void write_coordinate_tables(float* tables) {
  for (int i = static_cast<int>(threadIdx.x); i < kFragment * kFragment; i += kThreads) {
    tables[i] = static_cast<float>(i / kFragment);
    tables[kFragment * kFragment + i] = static_cast<float>(i % kFragment);
  }
}

// Warp-wide (a wmma collective): this lane's element coordinates, from the tables above.
__device__ inline FragmentCoordinates read_coordinates(const float* tables) {
  FragmentCoordinates at;
  Accumulator table;
  nvcuda::wmma::load_matrix_sync(table, tables, kFragment, nvcuda::wmma::mem_row_major);
#pragma unroll
  for (int i = 0; i < kAccumulatorElements; ++i)
    at.row[i] = static_cast<int>(table.x[i]);
  nvcuda::wmma::load_matrix_sync(table, tables + kFragment * kFragment, kFragment,
                                 nvcuda::wmma::mem_row_major);
#pragma unroll
  for (int i = 0; i < kAccumulatorElements; ++i)
    at.col[i] = static_cast<int>(table.x[i]);
  return at;
}

// Block-wide: rows [row0, row0 + 64) of head `head` of a (B, T, heads, kHeadDim) bf16 tensor, batch
// `batch`, into a (64, kTileStride) shared tile; rows at or past `seq` become zeros (finite, so that a
// masked probability of 0 times them stays 0). 16-byte loads: the launcher checked the alignment.
template <int kHeadDim>
__device__ inline void load_tile(BF16* tile, const BF16* tensor, int batch, int row0, int seq, int heads,
                                 int head) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  for (int index = static_cast<int>(threadIdx.x); index < kTileRows * kChunks; index += kThreads) {
    const int row = index / kChunks;
    const int chunk = index % kChunks;
    const int t = row0 + row;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (t < seq) {
      const int64_t offset = ((static_cast<int64_t>(batch) * seq + t) * heads + head) * kHeadDim + chunk * 8;
      value = *reinterpret_cast<const uint4*>(tensor + offset);
    }
    *reinterpret_cast<uint4*>(tile + row * kTileStride<kHeadDim> + chunk * 8) = value;
  }
}

// Block-wide: entries [row0, row0 + 64) of one (batch, head) row of a (B, heads, T) f32 tensor, times
// `multiplier`, into shared `rows`; 0 past `seq` (those rows are masked out).
__device__ inline void load_row_values(float* rows, const float* tensor, int batch, int head, int heads,
                                       int row0, int seq, float multiplier) {
  for (int i = static_cast<int>(threadIdx.x); i < kTileRows; i += kThreads) {
    const int t = row0 + i;
    rows[i] = t < seq ? tensor[(static_cast<int64_t>(batch) * heads + head) * seq + t] * multiplier : 0.0f;
  }
}

// Warp-wide: acc += A B^T, A = 16 rows of a tile (row-major, from `a`), B = 16 rows of another tile (from
// `b`), both kHeadDim wide: a 16x16 block of Q K^T, dO V^T or K Q^T.
template <int kHeadDim>
__device__ inline void mma_rows_by_rows(Accumulator& acc, const BF16* a, const BF16* b) {
#pragma unroll
  for (int step = 0; step < kHeadDim / kFragment; ++step) {
    FragmentA a_fragment;
    FragmentBT b_fragment;
    nvcuda::wmma::load_matrix_sync(a_fragment, a + step * kFragment, kTileStride<kHeadDim>);
    nvcuda::wmma::load_matrix_sync(b_fragment, b + step * kFragment, kTileStride<kHeadDim>);
    nvcuda::wmma::mma_sync(acc, a_fragment, b_fragment, acc);
  }
}

// Warp-wide: acc (16, kHeadDim) += strip (16, 64) bf16 (stride kStripStride) x tile (64, kHeadDim): P V,
// P^T dO, dS^T Q, dS K.
template <int kHeadDim>
__device__ inline void mma_strip_by_tile(Accumulator (&acc)[kHeadDim / kFragment], const BF16* strip,
                                         const BF16* tile) {
#pragma unroll
  for (int step = 0; step < kTileFragments; ++step) {
    FragmentA a_fragment;
    nvcuda::wmma::load_matrix_sync(a_fragment, strip + step * kFragment, kStripStride);
#pragma unroll
    for (int n = 0; n < kHeadDim / kFragment; ++n) {
      FragmentB b_fragment;
      nvcuda::wmma::load_matrix_sync(
          b_fragment, tile + step * kFragment * kTileStride<kHeadDim> + n * kFragment, kTileStride<kHeadDim>);
      nvcuda::wmma::mma_sync(acc[n], a_fragment, b_fragment, acc[n]);
    }
  }
}

template <int kHeadDim>
__device__ inline void zero(Accumulator (&acc)[kHeadDim / kFragment]) {
#pragma unroll
  for (int n = 0; n < kHeadDim / kFragment; ++n)
    nvcuda::wmma::fill_fragment(acc[n], 0.0f);
}

// Warp-wide: writes a warp's (16, kHeadDim) result, rows row0 + 0..15, to head `head` of a (B, T, heads,
// kHeadDim) bf16 tensor, skipping rows at or past `seq`. Each lane stores its own elements.
template <int kHeadDim>
__device__ inline void store_rows(BF16* tensor, const Accumulator (&acc)[kHeadDim / kFragment],
                                  const FragmentCoordinates& at, int batch, int row0, int seq, int heads,
                                  int head) {
#pragma unroll
  for (int i = 0; i < kAccumulatorElements; ++i) {
    const int t = row0 + at.row[i];
    if (t >= seq) continue;
    BF16* row = tensor + ((static_cast<int64_t>(batch) * seq + t) * heads + head) * kHeadDim;
#pragma unroll
    for (int n = 0; n < kHeadDim / kFragment; ++n)
      row[n * kFragment + at.col[i]] = __float2bfloat16_rn(acc[n].x[i]);
  }
}

// Whether query t sees key j: t - window <= j <= t.
__device__ inline bool visible(int t, int j, int window) {
  return j <= t && t - j <= window;
}

// ---- host side ----

// An attention call's sizes, checked to fit the kernels' int indices and grid limits. window is clamped to
// seq (every larger window is plain causal).
struct AttentionShape {
  int batch, seq, heads, kv_heads, head_dim, window;
};

inline void check_aligned(const TensorView& t, const char* op, const char* name) {
  NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(t.data) % 16 == 0,
                  "{} on CUDA: {} must start on a 16-byte boundary (the kernels load 16-byte chunks), got {}",
                  op, name, t.data);
}

// The checks both passes make on q, k, v (B, T, H|Hkv, D) bf16, out (B, T, H, D) bf16 and lse (B, H, T)
// f32, before any CUDA call.
inline AttentionShape check_attention(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, const TensorView& lse, int64_t window,
                                      const char* op) {
  check_tensor(q, DType::kBF16, op, "q");
  check_tensor(k, DType::kBF16, op, "k");
  check_tensor(v, DType::kBF16, op, "v");
  check_tensor(out, DType::kBF16, op, "out");
  check_tensor(lse, DType::kF32, op, "lse");
  check_rank(q, 4, op, "q");
  check_rank(k, 4, op, "k");
  check_same_shape(k, v, op);
  check_same_shape(q, out, op);
  const int64_t batch = q.shape[0], seq = q.shape[1], heads = q.shape[2], kv_heads = k.shape[2];
  const int64_t head_dim = q.shape[3];
  NANOFORGE_CHECK(k.shape[0] == batch && k.shape[1] == seq && k.shape[3] == head_dim && kv_heads > 0 &&
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
  // Grid: x = 64-row tiles, y = heads, z = batch (at most 65535 each for y and z); int row indices.
  NANOFORGE_CHECK(seq <= std::numeric_limits<int>::max() - kTileRows && heads <= 65535 && batch <= 65535,
                  "{} on CUDA: q {} is too large for one launch (T < 2^31, H and B at most 65535)", op,
                  q.describe());
  check_aligned(q, op, "q");
  check_aligned(k, op, "k");
  check_aligned(v, op, "v");
  check_aligned(out, op, "out");
  return {static_cast<int>(batch),    static_cast<int>(seq),      static_cast<int>(heads),
          static_cast<int>(kv_heads), static_cast<int>(head_dim), static_cast<int>(std::min(window, seq))};
}

inline int tile_count(int seq) {
  return (seq + kTileRows - 1) / kTileRows;
}

// Calls launch(std::integral_constant<int, D>{}) for the head dim D (32, 64 or 128, checked above).
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

// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KB one must opt in).
template <class Kernel>
void allow_shared_bytes(Kernel* kernel, int bytes) {
  NANOFORGE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

}  // namespace nanoforge::cuda::flash
