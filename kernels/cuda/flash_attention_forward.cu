// Causal sliding-window attention forward on the GPU, the CUDA twin of kernels/cpu/attention.cpp:
// FlashAttention-2 with online softmax in registers. One block of four warps per (batch, head, 128-query
// tile), each warp owning 32 query rows (two m16 row blocks, so every K and V fragment it loads serves two
// mma's); it walks the key tiles (64 keys; 32 at head dim 128) from the first its window reaches to the
// diagonal, the next K and V tiles arriving by cp.async while the current ones are used (two buffers each).
// Per key tile a warp computes S = Q K^T with mma.sync, masks and exponentiates S in base 2 in its
// accumulators, rescales O and adds P V with P taken straight from those registers as the A operand;
// lse = max + log(sum). Tiles outside the window are never loaded (docs/kernels.md, "Flash attention").
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/launch.cuh"

namespace nanoforge::cuda {
namespace {

using namespace flash;

constexpr int kForwardWarps = 4;
constexpr int kForwardThreads = kForwardWarps * kWarpSize;
constexpr int kForwardRowBlocks = 2;                            // m16 blocks per warp
constexpr int kForwardWarpRows = kForwardRowBlocks * kMmaRows;  // 32
constexpr int kQueryTile = kForwardWarps * kForwardWarpRows;    // 128
// Keys per key tile: at head dim 128 a warp's O (32 x 128 f32) leaves room in its 255 registers for
// 32 x 32 scores; with 32 x 64 the sm_121 build spills (ptxas -v).
template <int kHeadDim>
constexpr int kForwardKeyTile = kHeadDim == 128 ? 32 : 64;

// Dynamic shared memory of the forward kernel, as byte offsets: Q (128, D), then K and V (key tile, D) twice.
template <int kHeadDim>
struct ForwardShared {
  static constexpr int kKeyTileBytes = kForwardKeyTile<kHeadDim> * kHeadDim * 2;
  static constexpr int kQuery = 0;
  static constexpr int kKey = kQuery + kQueryTile * kHeadDim * 2;
  static constexpr int kValue = kKey + 2 * kKeyTileBytes;
  static constexpr int kBytes = kValue + 2 * kKeyTileBytes;
  static_assert(kBytes <= kMaxSharedBytes, "forward tiles exceed the shared memory of one GB10 block");
};

// q, out (B, T, H, D) bf16; k, v (B, T, Hkv, D) bf16, positions `rows` heads apart; lse (B, H, T) f32. Grid
// (query tiles, H, B), the last query tile first (it has the most keys). scale_log2 = scale * log2(e): the
// kernel works in base 2.
template <int kHeadDim>
__global__ void __launch_bounds__(kForwardThreads)
    attention_forward_kernel(BF16* out, float* lse, const BF16* q, const BF16* k, const BF16* v, int seq,
                             int heads, int kv_heads, RowHeads rows, int window, float scale_log2) {
  using Shared = ForwardShared<kHeadDim>;
  constexpr int kDimBlocks = kHeadDim / kMmaColumns;
  constexpr int kKeysPerTile = kForwardKeyTile<kHeadDim>;  // (flash::kKeyTile is the backward's)
  constexpr int kKeyBlocks = kKeysPerTile / kMmaColumns;   // n8 blocks of scores per row block
  constexpr int kTileElements = kKeysPerTile * kHeadDim;
  NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128);
  BF16* query_tile = reinterpret_cast<BF16*>(shared + Shared::kQuery);
  BF16* key_tiles = reinterpret_cast<BF16*>(shared + Shared::kKey);
  BF16* value_tiles = reinterpret_cast<BF16*>(shared + Shared::kValue);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int query_tile_index = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int kv_head = head / (heads / kv_heads);
  const int t0 = query_tile_index * kQueryTile;
  const int first_key_tile = max(0, t0 - window) / kKeysPerTile;
  const int last_key_tile = min(t0 + kQueryTile - 1, seq - 1) / kKeysPerTile;
  const int warp_row0 = warp * kForwardWarpRows;  // within the tile
  const int warp_t0 = t0 + warp_row0;

  load_tile_async<kHeadDim, kQueryTile, kForwardThreads>(query_tile, q, batch, t0, seq, rows.q, head);
  load_tile_async<kHeadDim, kKeysPerTile, kForwardThreads>(key_tiles, k, batch, first_key_tile * kKeysPerTile,
                                                           seq, rows.k, kv_head);
  load_tile_async<kHeadDim, kKeysPerTile, kForwardThreads>(
      value_tiles, v, batch, first_key_tile * kKeysPerTile, seq, rows.v, kv_head);
  ptx::cp_async_commit_group();

  // Lane 4g + t holds, in row block m, rows g (half 0) and g + 8 (half 1): their running max (base 2) and
  // its share of their running sum (columns 2t, 2t + 1 of each n-block; the four lanes add up at the end).
  float row_max[kForwardRowBlocks][2];
  float row_sum[kForwardRowBlocks][2];
#pragma unroll
  for (int m = 0; m < kForwardRowBlocks; ++m) {
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
  }
  float output[kForwardRowBlocks][kDimBlocks][4];
  zero(output);

  for (int key_tile_index = first_key_tile; key_tile_index <= last_key_tile; ++key_tile_index) {
    const int buffer = (key_tile_index - first_key_tile) % 2;
    if (key_tile_index < last_key_tile) {
      // The other buffers held the previous tile, which every warp finished before the barrier that ended
      // the previous iteration.
      const int next = (key_tile_index + 1) * kKeysPerTile;
      load_tile_async<kHeadDim, kKeysPerTile, kForwardThreads>(key_tiles + (1 - buffer) * kTileElements, k,
                                                               batch, next, seq, rows.k, kv_head);
      load_tile_async<kHeadDim, kKeysPerTile, kForwardThreads>(value_tiles + (1 - buffer) * kTileElements, v,
                                                               batch, next, seq, rows.v, kv_head);
      ptx::cp_async_commit_group();
      ptx::cp_async_wait_group<1>();  // this tile's copies (and Q's) have landed, the next ones may not
    } else {
      ptx::cp_async_wait_group<0>();
    }
    __syncthreads();  // every thread's copies of this tile are visible to every warp

    const int key0 = key_tile_index * kKeysPerTile;
    const BF16* key_tile = key_tiles + buffer * kTileElements;
    const BF16* value_tile = value_tiles + buffer * kTileElements;
    if (!none_visible(warp_t0, kForwardWarpRows, key0, kKeysPerTile, window)) {
      float scores[kForwardRowBlocks][kKeyBlocks][4];
      zero(scores);
      mma_rows_by_rows<kHeadDim, kForwardRowBlocks, kKeysPerTile>(scores, query_tile, warp_row0, key_tile, 0);

      const bool masked = !all_visible(warp_t0, kForwardWarpRows, key0, kKeysPerTile, window);
#pragma unroll
      for (int m = 0; m < kForwardRowBlocks; ++m) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int t = warp_t0 + m * kMmaRows + lane / 4 + half * 8;
          float tile_max = -INFINITY;
#pragma unroll
          for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& x = scores[m][n][2 * half + e];
              const int j = key0 + n * kMmaColumns + 2 * (lane % 4) + e;
              x = !masked || visible(t, j, window) ? x * scale_log2 : -INFINITY;
              tile_max = fmaxf(tile_max, x);
            }
          }
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
          const float new_max = fmaxf(row_max[m][half], tile_max);
          // A row that has seen no visible key yet keeps max -inf; exponentiate against 0 so that its
          // probabilities and the rescale factor come out 0 rather than NaN.
          const float base = new_max == -INFINITY ? 0.0f : new_max;
          const float rescale = exp2f(row_max[m][half] - base);
          float tile_sum = 0.0f;
#pragma unroll
          for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& x = scores[m][n][2 * half + e];
              x = exp2f(x - base);
              tile_sum += x;
            }
          }
          row_sum[m][half] = row_sum[m][half] * rescale + tile_sum;
          row_max[m][half] = new_max;
#pragma unroll
          for (int n = 0; n < kDimBlocks; ++n) {
            output[m][n][2 * half] *= rescale;
            output[m][n][2 * half + 1] *= rescale;
          }
        }
      }
      // O += P V, P rounded to bf16 from the score registers.
      mma_scores_by_tile<kHeadDim, kForwardRowBlocks, kKeysPerTile>(output, scores, value_tile, 0);
    }
    __syncthreads();  // every warp is done with this tile's buffers before the next iteration refills them
  }

  // out = O / sum, lse = max + log(sum). Rows past the sequence ran on zero padding and are not stored.
#pragma unroll
  for (int m = 0; m < kForwardRowBlocks; ++m) {
    float inverse[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = row_sum[m][half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      inverse[half] = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int t = warp_t0 + m * kMmaRows + lane / 4 + half * 8;
      if (lane % 4 == 0 && t < seq) {
        lse[(static_cast<int64_t>(batch) * heads + head) * seq + t] = row_max[m][half] * kLn2 + logf(sum);
      }
    }
    store_rows<kHeadDim>(out, output[m], inverse, batch, warp_t0 + m * kMmaRows, seq, rows.out, head);
  }
}

}  // namespace

int64_t attention_workspace_bytes(int64_t batch, int64_t seq, int64_t heads, int64_t /*kv_heads*/,
                                  int64_t /*head_dim*/, int64_t /*window*/) {
  // The backward's delta = rowsum(dO * O), (B, H, T) f32; the forward needs none.
  return batch * heads * seq * static_cast<int64_t>(sizeof(float));
}

void attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v, int64_t window,
                       double scale, TensorView /*workspace*/, const ops::KernelSettings& /*settings*/) {
  constexpr const char* kOp = "attention_forward";
  const AttentionShape shape = check_attention(q, k, v, out, lse, window, kOp);
  if (static_cast<int64_t>(shape.batch) * shape.seq * shape.heads == 0) return;
  const RowHeads rows{
      row_heads(q, kOp, "q"), row_heads(k, kOp, "k"), row_heads(v, kOp, "v"), shape.heads, 0, 0, 0};
  const dim3 grid(tile_count(shape.seq, kQueryTile), shape.heads, shape.batch);
  const float scale_log2 = static_cast<float>(scale) * kLog2E;
  with_head_dim(shape.head_dim, [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    constexpr int kBytes = ForwardShared<kHeadDim>::kBytes;
    allow_shared_bytes(attention_forward_kernel<kHeadDim>, kBytes);
    launch_kernel<attention_forward_kernel<kHeadDim>>(grid, kForwardThreads, kBytes)(
        out.as<BF16>(), lse.as<float>(), q.as<BF16>(), k.as<BF16>(), v.as<BF16>(), shape.seq, shape.heads,
        shape.kv_heads, rows, shape.window, scale_log2);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
