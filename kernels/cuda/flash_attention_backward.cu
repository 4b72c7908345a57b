// Causal sliding-window attention backward on the GPU, the CUDA twin of kernels/cpu/attention.cpp's
// backward: FlashAttention-2's pass structure with dQ in a pass of its own rather than fp32 atomics, so the
// result is the same bits on every run and under every schedule. Three kernels: delta = rowsum(dO * O) into
// the workspace; dK, dV per (batch, kv head, 64-key tile), walking the query tiles of its GQA group; dQ per
// (batch, head, 64-query tile), walking its key tiles and recomputing S and dP. dK and dQ are scaled once at
// the end. Tiling, instructions and why dQ has its own pass: docs/kernels.md, "Flash attention".
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/launch.cuh"

namespace nanoforge::cuda {
namespace {

using namespace flash;

constexpr int kDeltaRowsPerBlock = 8;  // one warp per (b, t, h) row

// delta (B, H, T) f32 = sum over d of d_out * out, both (B, T, H, D) bf16 (D even, rows 4-byte aligned).
__global__ void attention_delta_kernel(float* delta, const BF16* d_out, const BF16* out, int64_t rows,
                                       int seq, int heads, int head_dim) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kDeltaRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so warp_sum stays full-warp
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const __nv_bfloat162* d_out_row = reinterpret_cast<const __nv_bfloat162*>(d_out + row * head_dim);
  const __nv_bfloat162* out_row = reinterpret_cast<const __nv_bfloat162*>(out + row * head_dim);
  float sum = 0.0f;
  for (int pair = lane; pair < head_dim / 2; pair += kWarpSize) {
    const float2 g = __bfloat1622float2(d_out_row[pair]);
    const float2 o = __bfloat1622float2(out_row[pair]);
    sum += g.x * o.x + g.y * o.y;
  }
  sum = warp_sum(sum);
  if (lane == 0) {
    // row = (b * T + t) * H + h.
    const int64_t h = row % heads;
    const int64_t t = (row / heads) % seq;
    const int64_t b = row / (static_cast<int64_t>(heads) * seq);
    delta[(b * heads + h) * seq + t] = sum;
  }
}

constexpr int kBackwardWarps = 4;
constexpr int kBackwardThreads = kBackwardWarps * kWarpSize;
constexpr int kBackwardTile = kBackwardWarps * kMmaRows;  // 64 keys (dK/dV) or queries (dQ) per block
static_assert(kBackwardTile == kKeyTile, "both backward kernels walk 64-row tiles of the other side");
constexpr int kQueryChunk = 32;  // queries per step of the dK/dV kernel (bounds its score registers)

// Dynamic shared memory of the dK/dV kernel, as byte offsets: K, V (64, D), then Q and dO (64, D) twice,
// then lse and delta (64 f32) twice.
template <int kHeadDim>
struct KeyValueShared {
  static constexpr int kKey = 0;
  static constexpr int kValue = kKey + kTileBytes<kHeadDim>;
  static constexpr int kQuery = kValue + kTileBytes<kHeadDim>;
  static constexpr int kDOut = kQuery + 2 * kTileBytes<kHeadDim>;
  static constexpr int kLse = kDOut + 2 * kTileBytes<kHeadDim>;
  static constexpr int kDelta = kLse + 2 * kKeyTile * 4;
  static constexpr int kBytes = kDelta + 2 * kKeyTile * 4;
  static_assert(kBytes <= kMaxSharedBytes, "dK/dV tiles exceed the shared memory of one GB10 block");
};

// Block-wide: the loads of one step of the dK/dV kernel (query tile q0 of head `head`) into buffer `buffer`:
// Q and dO by cp.async (the caller commits), lse and delta by plain loads.
template <int kHeadDim>
__device__ inline void load_query_step(unsigned char* shared, int buffer, const BF16* d_out, const BF16* q,
                                       const float* lse, const float* delta, int batch, int q0, int seq,
                                       int heads, const RowHeads& rows, int head) {
  using Shared = KeyValueShared<kHeadDim>;
  constexpr int kTileElements = kKeyTile * kHeadDim;
  auto* query_tile = reinterpret_cast<BF16*>(shared + Shared::kQuery) + buffer * kTileElements;
  auto* d_out_tile = reinterpret_cast<BF16*>(shared + Shared::kDOut) + buffer * kTileElements;
  load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(query_tile, q, batch, q0, seq, rows.q, head);
  load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(d_out_tile, d_out, batch, q0, seq, rows.out, head);
  load_row_values<kKeyTile, kBackwardThreads>(
      reinterpret_cast<float*>(shared + Shared::kLse) + buffer * kKeyTile, lse, batch, head, heads, q0, seq);
  load_row_values<kKeyTile, kBackwardThreads>(
      reinterpret_cast<float*>(shared + Shared::kDelta) + buffer * kKeyTile, delta, batch, head, heads, q0,
      seq);
}

// d_k, d_v, k, v (B, T, Hkv, D) bf16; d_out, q (B, T, H, D) bf16 (positions `rows` heads apart); lse, delta
// (B, H, T) f32. Grid (key tiles, Hkv, B), the first key tile first (it is seen by the most queries). Warp w
// owns keys key0 + 16w .. + 15.
template <int kHeadDim>
__global__ void __launch_bounds__(kBackwardThreads)
    attention_backward_key_value_kernel(BF16* d_k, BF16* d_v, const BF16* d_out, const BF16* q, const BF16* k,
                                        const BF16* v, const float* lse, const float* delta, int seq,
                                        int heads, int kv_heads, RowHeads rows, int window, float scale,
                                        float scale_log2) {
  using Shared = KeyValueShared<kHeadDim>;
  constexpr int kDimBlocks = kHeadDim / kMmaColumns;
  constexpr int kChunkBlocks = kQueryChunk / kMmaColumns;
  constexpr int kTileElements = kKeyTile * kHeadDim;
  NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128);
  const BF16* key_tile = reinterpret_cast<const BF16*>(shared + Shared::kKey);
  const BF16* value_tile = reinterpret_cast<const BF16*>(shared + Shared::kValue);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int key_tile_index = static_cast<int>(blockIdx.x);
  const int kv_head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int group = heads / kv_heads;
  const int key0 = key_tile_index * kKeyTile;
  const int warp_row0 = warp * kMmaRows;  // within the tile
  const int warp_key0 = key0 + warp_row0;
  // Queries that see a key j lie in [j, j + window]; the tile's last key is key0 + 63.
  const int64_t last_seen = static_cast<int64_t>(key0) + kKeyTile - 1 + window;
  const int last_query = last_seen < seq ? static_cast<int>(last_seen) : seq - 1;
  const int first_query_tile = key_tile_index;
  const int tiles_per_head = last_query / kKeyTile - first_query_tile + 1;
  const int steps = group * tiles_per_head;  // (head, query tile) pairs, head-major

  load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(reinterpret_cast<BF16*>(shared + Shared::kKey), k,
                                                        batch, key0, seq, rows.k, kv_head);
  load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(reinterpret_cast<BF16*>(shared + Shared::kValue), v,
                                                        batch, key0, seq, rows.v, kv_head);
  load_query_step<kHeadDim>(shared, 0, d_out, q, lse, delta, batch, first_query_tile * kKeyTile, seq, heads,
                            rows, kv_head * group);
  ptx::cp_async_commit_group();

  float d_key[1][kDimBlocks][4];
  float d_value[1][kDimBlocks][4];
  zero(d_key);
  zero(d_value);

  for (int step = 0; step < steps; ++step) {
    const int buffer = step % 2;
    if (step + 1 < steps) {
      // The other buffers held step - 1, which every warp finished before the previous iteration's last
      // barrier.
      const int next_head = kv_head * group + (step + 1) / tiles_per_head;
      const int next_q0 = (first_query_tile + (step + 1) % tiles_per_head) * kKeyTile;
      load_query_step<kHeadDim>(shared, 1 - buffer, d_out, q, lse, delta, batch, next_q0, seq, heads, rows,
                                next_head);
      ptx::cp_async_commit_group();
      ptx::cp_async_wait_group<1>();
    } else {
      ptx::cp_async_wait_group<0>();
    }
    __syncthreads();  // this step's tiles (and, at step 0, K and V) are visible to every warp

    const int q0 = (first_query_tile + step % tiles_per_head) * kKeyTile;
    const BF16* query_tile = reinterpret_cast<const BF16*>(shared + Shared::kQuery) + buffer * kTileElements;
    const BF16* d_out_tile = reinterpret_cast<const BF16*>(shared + Shared::kDOut) + buffer * kTileElements;
    const float* lse_rows = reinterpret_cast<const float*>(shared + Shared::kLse) + buffer * kKeyTile;
    const float* delta_rows = reinterpret_cast<const float*>(shared + Shared::kDelta) + buffer * kKeyTile;
#pragma unroll 1
    for (int chunk0 = 0; chunk0 < kKeyTile; chunk0 += kQueryChunk) {
      const int chunk_q0 = q0 + chunk0;
      if (none_visible(chunk_q0, kQueryChunk, warp_key0, kMmaRows, window)) continue;
      // Rows of S^T are this warp's keys, columns the chunk's queries.
      float scores[1][kChunkBlocks][4];
      float d_scores[1][kChunkBlocks][4];
      zero(scores);
      zero(d_scores);
      mma_rows_by_rows<kHeadDim, 1, kQueryChunk>(scores, key_tile, warp_row0, query_tile, chunk0);
      mma_rows_by_rows<kHeadDim, 1, kQueryChunk>(d_scores, value_tile, warp_row0, d_out_tile, chunk0);
      const bool masked =
          chunk_q0 + kQueryChunk > seq || !all_visible(chunk_q0, kQueryChunk, warp_key0, kMmaRows, window);
#pragma unroll
      for (int n = 0; n < kChunkBlocks; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int j = warp_key0 + lane / 4 + (i / 2) * 8;
          const int column = chunk0 + n * kMmaColumns + 2 * (lane % 4) + i % 2;  // query q0 + column
          const int t = q0 + column;
          const bool seen = !masked || (t < seq && visible(t, j, window));
          const float p = seen ? exp2f(scores[0][n][i] * scale_log2 - lse_rows[column] * kLog2E) : 0.0f;
          scores[0][n][i] = p;
          d_scores[0][n][i] = p * (d_scores[0][n][i] - delta_rows[column]);
        }
      }
      mma_scores_by_tile<kHeadDim, 1, kQueryChunk>(d_value, scores, d_out_tile, chunk0);  // dV += P^T dO
      mma_scores_by_tile<kHeadDim, 1, kQueryChunk>(d_key, d_scores, query_tile, chunk0);  // dK += dS^T Q
    }
    __syncthreads();  // every warp is done with this step's buffers before the next iteration refills them
  }
  const float key_factor[2] = {scale, scale};
  const float value_factor[2] = {1.0f, 1.0f};
  store_rows<kHeadDim>(d_k, d_key[0], key_factor, batch, warp_key0, seq, rows.d_k, kv_head);
  store_rows<kHeadDim>(d_v, d_value[0], value_factor, batch, warp_key0, seq, rows.d_v, kv_head);
}

// Dynamic shared memory of the dQ kernel, as byte offsets: Q, dO (64, D), then K and V (64, D) twice.
template <int kHeadDim>
struct QueryShared {
  static constexpr int kQuery = 0;
  static constexpr int kDOut = kQuery + kTileBytes<kHeadDim>;
  static constexpr int kKey = kDOut + kTileBytes<kHeadDim>;
  static constexpr int kValue = kKey + 2 * kTileBytes<kHeadDim>;
  static constexpr int kBytes = kValue + 2 * kTileBytes<kHeadDim>;
  static_assert(kBytes <= kMaxSharedBytes, "dQ tiles exceed the shared memory of one GB10 block");
};

// d_q, d_out, q (B, T, H, D) bf16; k, v (B, T, Hkv, D) bf16 (positions `rows` heads apart); lse, delta
// (B, H, T) f32. Grid (query tiles, H, B), the last query tile first. Warp w owns queries t0 + 16w .. + 15.
template <int kHeadDim>
__global__ void __launch_bounds__(kBackwardThreads)
    attention_backward_query_kernel(BF16* d_q, const BF16* d_out, const BF16* q, const BF16* k, const BF16* v,
                                    const float* lse, const float* delta, int seq, int heads, int kv_heads,
                                    RowHeads rows, int window, float scale, float scale_log2) {
  using Shared = QueryShared<kHeadDim>;
  constexpr int kDimBlocks = kHeadDim / kMmaColumns;
  constexpr int kKeyBlocks = kKeyTile / kMmaColumns;
  constexpr int kTileElements = kKeyTile * kHeadDim;
  NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128);
  BF16* query_tile = reinterpret_cast<BF16*>(shared + Shared::kQuery);
  BF16* d_out_tile = reinterpret_cast<BF16*>(shared + Shared::kDOut);
  BF16* key_tiles = reinterpret_cast<BF16*>(shared + Shared::kKey);
  BF16* value_tiles = reinterpret_cast<BF16*>(shared + Shared::kValue);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int query_tile_index = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int kv_head = head / (heads / kv_heads);
  const int t0 = query_tile_index * kBackwardTile;
  const int first_key_tile = max(0, t0 - window) / kKeyTile;
  const int last_key_tile = min(t0 + kBackwardTile - 1, seq - 1) / kKeyTile;
  const int warp_row0 = warp * kMmaRows;
  const int warp_t0 = t0 + warp_row0;

  load_tile_async<kHeadDim, kBackwardTile, kBackwardThreads>(query_tile, q, batch, t0, seq, rows.q, head);
  load_tile_async<kHeadDim, kBackwardTile, kBackwardThreads>(d_out_tile, d_out, batch, t0, seq, rows.out,
                                                             head);
  load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(key_tiles, k, batch, first_key_tile * kKeyTile, seq,
                                                        rows.k, kv_head);
  load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(value_tiles, v, batch, first_key_tile * kKeyTile, seq,
                                                        rows.v, kv_head);
  ptx::cp_async_commit_group();

  // This lane's rows g and g + 8: lse (times log2 e) and delta, 0 past the sequence.
  float lse_log2[2], delta_row[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int t = warp_t0 + lane / 4 + half * 8;
    const int64_t at = (static_cast<int64_t>(batch) * heads + head) * seq + t;
    lse_log2[half] = t < seq ? lse[at] * kLog2E : 0.0f;
    delta_row[half] = t < seq ? delta[at] : 0.0f;
  }

  float d_query[1][kDimBlocks][4];
  zero(d_query);

  for (int key_tile_index = first_key_tile; key_tile_index <= last_key_tile; ++key_tile_index) {
    const int buffer = (key_tile_index - first_key_tile) % 2;
    if (key_tile_index < last_key_tile) {
      const int next = (key_tile_index + 1) * kKeyTile;
      load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(key_tiles + (1 - buffer) * kTileElements, k,
                                                            batch, next, seq, rows.k, kv_head);
      load_tile_async<kHeadDim, kKeyTile, kBackwardThreads>(value_tiles + (1 - buffer) * kTileElements, v,
                                                            batch, next, seq, rows.v, kv_head);
      ptx::cp_async_commit_group();
      ptx::cp_async_wait_group<1>();
    } else {
      ptx::cp_async_wait_group<0>();
    }
    __syncthreads();

    const int key0 = key_tile_index * kKeyTile;
    const BF16* key_tile = key_tiles + buffer * kTileElements;
    const BF16* value_tile = value_tiles + buffer * kTileElements;
    if (!none_visible(warp_t0, kMmaRows, key0, kKeyTile, window)) {
      float scores[1][kKeyBlocks][4];
      float d_scores[1][kKeyBlocks][4];
      zero(scores);
      zero(d_scores);
      mma_rows_by_rows<kHeadDim, 1, kKeyTile>(scores, query_tile, warp_row0, key_tile, 0);
      mma_rows_by_rows<kHeadDim, 1, kKeyTile>(d_scores, d_out_tile, warp_row0, value_tile, 0);
      const bool masked = warp_t0 + kMmaRows > seq || !all_visible(warp_t0, kMmaRows, key0, kKeyTile, window);
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int half = i / 2;
          const int t = warp_t0 + lane / 4 + half * 8;
          const int j = key0 + n * kMmaColumns + 2 * (lane % 4) + i % 2;
          const bool seen = !masked || (t < seq && visible(t, j, window));
          const float p = seen ? exp2f(scores[0][n][i] * scale_log2 - lse_log2[half]) : 0.0f;
          d_scores[0][n][i] = p * (d_scores[0][n][i] - delta_row[half]);
        }
      }
      mma_scores_by_tile<kHeadDim, 1, kKeyTile>(d_query, d_scores, key_tile, 0);  // dQ += dS K
    }
    __syncthreads();
  }
  const float factor[2] = {scale, scale};
  store_rows<kHeadDim>(d_q, d_query[0], factor, batch, warp_t0, seq, rows.d_q, head);
}

}  // namespace

void attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                        HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace, const ops::KernelSettings& /*settings*/) {
  constexpr const char* kOp = "attention_backward";
  const AttentionShape shape = check_attention(q, k, v, out, lse, window, kOp);
  check_tensor(d_q.whole, DType::kBF16, kOp, "d_q");
  check_tensor(d_k.whole, DType::kBF16, kOp, "d_k");
  check_tensor(d_v.whole, DType::kBF16, kOp, "d_v");
  check_tensor(d_out, DType::kBF16, kOp, "d_out");
  check_same_shape(d_q, q, kOp);
  check_same_shape(d_out, q, kOp);
  check_same_shape(d_k, k, kOp);
  check_same_shape(d_v, v, kOp);
  check_aligned(d_q.data(), kOp, "d_q");
  check_aligned(d_k.data(), kOp, "d_k");
  check_aligned(d_v.data(), kOp, "d_v");
  check_aligned(d_out.data, kOp, "d_out");
  check_on_gpu(workspace, kOp, "workspace");
  const int64_t delta_bytes =
      attention_workspace_bytes(shape.batch, shape.seq, shape.heads, shape.kv_heads, shape.head_dim, window);
  NANOFORGE_CHECK(workspace.bytes() >= delta_bytes,
                  "{} on CUDA: workspace {} holds {} bytes, needs {} (ops::attention_workspace_bytes)", kOp,
                  workspace.describe(), workspace.bytes(), delta_bytes);
  check_aligned(workspace.data, kOp, "workspace");
  const int64_t rows = static_cast<int64_t>(shape.batch) * shape.seq * shape.heads;
  if (rows == 0) return;
  float* delta = workspace.as<float>();
  const RowHeads row_strides{
      row_heads(q, kOp, "q"),     row_heads(k, kOp, "k"),     row_heads(v, kOp, "v"),    shape.heads,
      row_heads(d_q, kOp, "d_q"), row_heads(d_k, kOp, "d_k"), row_heads(d_v, kOp, "d_v")};

  const int64_t delta_blocks = (rows + kDeltaRowsPerBlock - 1) / kDeltaRowsPerBlock;
  NANOFORGE_CHECK(delta_blocks <= std::numeric_limits<int>::max(), "{} on CUDA: q {} has too many rows", kOp,
                  q.describe());
  launch_kernel<attention_delta_kernel>(static_cast<unsigned>(delta_blocks), kDeltaRowsPerBlock * kWarpSize)(
      delta, d_out.as<BF16>(), out.as<BF16>(), rows, shape.seq, shape.heads, shape.head_dim);
  NANOFORGE_CUDA_CHECK_LAUNCH("attention_delta");

  const float scale_f = static_cast<float>(scale);
  const float scale_log2 = scale_f * kLog2E;
  const int tiles = tile_count(shape.seq, kBackwardTile);
  with_head_dim(shape.head_dim, [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    constexpr int kKeyValueBytes = KeyValueShared<kHeadDim>::kBytes;
    allow_shared_bytes(attention_backward_key_value_kernel<kHeadDim>, kKeyValueBytes);
    launch_kernel<attention_backward_key_value_kernel<kHeadDim>>(dim3(tiles, shape.kv_heads, shape.batch),
                                                                 kBackwardThreads, kKeyValueBytes)(
        d_k.as<BF16>(), d_v.as<BF16>(), d_out.as<BF16>(), q.as<BF16>(), k.as<BF16>(), v.as<BF16>(),
        lse.as<float>(), delta, shape.seq, shape.heads, shape.kv_heads, row_strides, shape.window, scale_f,
        scale_log2);
    NANOFORGE_CUDA_CHECK_LAUNCH("attention_backward_key_value");

    constexpr int kQueryBytes = QueryShared<kHeadDim>::kBytes;
    allow_shared_bytes(attention_backward_query_kernel<kHeadDim>, kQueryBytes);
    launch_kernel<attention_backward_query_kernel<kHeadDim>>(dim3(tiles, shape.heads, shape.batch),
                                                             kBackwardThreads, kQueryBytes)(
        d_q.as<BF16>(), d_out.as<BF16>(), q.as<BF16>(), k.as<BF16>(), v.as<BF16>(), lse.as<float>(), delta,
        shape.seq, shape.heads, shape.kv_heads, row_strides, shape.window, scale_f, scale_log2);
    NANOFORGE_CUDA_CHECK_LAUNCH("attention_backward_query");
  });
}

}  // namespace nanoforge::cuda
