// Causal sliding-window attention backward on the GPU, the CUDA twin of kernels/cpu/attention.cpp's
// backward: FlashAttention-2's, with dQ computed by a kernel of its own instead of atomics, so the result is
// the same bits on every run (ops::deterministic() changes nothing here). Three kernels:
//   delta  = rowsum(dO * O), (B, H, T) f32 in the workspace;
//   dK, dV: one block per (batch, kv head, 64-key tile) walks the query tiles that see its keys, for every
//           query head of its GQA group in order, recomputing P^T = exp(K Q^T scale - lse) and summing
//           dV += P^T dO and dK += dS^T Q scale, dS = P * (dO V^T - delta), in fp32 fragments;
//   dQ:     one block per (batch, head, 64-query tile) walks the key tiles it sees (as the forward does),
//           recomputes P and dS the same way and sums dQ += dS K scale.
// Each warp owns 16 rows of its block's tile, so its probabilities and score gradients never leave the warp:
// they are masked and exponentiated in registers and staged in shared memory, rounded to bf16, only as the
// A operand of the next tensor-core product. The dQ kernel recomputes S and dP (two of the five GEMMs) in
// exchange for having no atomics and no fp32 dQ buffer.
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

// Dynamic shared memory of the dK/dV kernel, as byte offsets (each a multiple of 128).
template <int kHeadDim>
struct KeyValueShared {
  static constexpr int kKey = 0;
  static constexpr int kValue = kKey + kTileBytes<kHeadDim>;
  static constexpr int kQuery = kValue + kTileBytes<kHeadDim>;
  static constexpr int kDOut = kQuery + kTileBytes<kHeadDim>;
  static constexpr int kLse = kDOut + kTileBytes<kHeadDim>;      // 64 f32, times log2(e)
  static constexpr int kDelta = kLse + kTileRows * 4;            // 64 f32
  static constexpr int kProbabilities = kDelta + kTileRows * 4;  // per warp (16, 64) bf16: P^T
  static constexpr int kScoreGradients = kProbabilities + kWarps * kStripBytes;  // per warp: dS^T * scale
  static constexpr int kCoordinates = kScoreGradients + kWarps * kStripBytes;
  static constexpr int kBytes = kCoordinates + kCoordinateTableBytes;
  static_assert(kBytes <= kMaxSharedBytes, "dK/dV tiles exceed the shared memory of one GB10 block");
  static_assert(regions_aligned({kValue, kQuery, kDOut, kLse, kDelta, kProbabilities, kScoreGradients,
                                 kCoordinates}));
};

// d_k, d_v, k, v (B, T, Hkv, D) bf16; d_out, q (B, T, H, D) bf16; lse, delta (B, H, T) f32. Grid (key tiles,
// Hkv, B), the first key tile first (it is seen by the most queries). Warp w owns keys key0 + 16w .. + 15.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_backward_key_value_kernel(BF16* d_k, BF16* d_v, const BF16* d_out, const BF16* q, const BF16* k,
                                        const BF16* v, const float* lse, const float* delta, int seq,
                                        int heads, int kv_heads, int window, float scale, float scale_log2) {
  using Shared = KeyValueShared<kHeadDim>;
  constexpr int kStride = kTileStride<kHeadDim>;
  constexpr int kColumnFragments = kHeadDim / kFragment;
  NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128);
  BF16* key_tile = reinterpret_cast<BF16*>(shared + Shared::kKey);
  BF16* value_tile = reinterpret_cast<BF16*>(shared + Shared::kValue);
  BF16* query_tile = reinterpret_cast<BF16*>(shared + Shared::kQuery);
  BF16* d_out_tile = reinterpret_cast<BF16*>(shared + Shared::kDOut);
  float* lse_log2 = reinterpret_cast<float*>(shared + Shared::kLse);
  float* delta_rows = reinterpret_cast<float*>(shared + Shared::kDelta);
  float* coordinate_tables = reinterpret_cast<float*>(shared + Shared::kCoordinates);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  BF16* probabilities = reinterpret_cast<BF16*>(shared + Shared::kProbabilities + warp * kStripBytes);
  BF16* score_gradients = reinterpret_cast<BF16*>(shared + Shared::kScoreGradients + warp * kStripBytes);

  const int key_tile_index = static_cast<int>(blockIdx.x);
  const int kv_head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int group = heads / kv_heads;
  const int key0 = key_tile_index * kTileRows;
  const int warp_key0 = key0 + warp * kFragment;
  // Queries that see a key j lie in [j, j + window]; the tile's last key is key0 + 63.
  const int64_t last_seen = static_cast<int64_t>(key0) + kTileRows - 1 + window;
  const int last_query = last_seen < seq ? static_cast<int>(last_seen) : seq - 1;
  const int last_query_tile = last_query / kTileRows;

  write_coordinate_tables(coordinate_tables);
  load_tile<kHeadDim>(key_tile, k, batch, key0, seq, kv_heads, kv_head);
  load_tile<kHeadDim>(value_tile, v, batch, key0, seq, kv_heads, kv_head);
  __syncthreads();
  const FragmentCoordinates at = read_coordinates(coordinate_tables);
  const BF16* key_strip = key_tile + warp * kFragment * kStride;
  const BF16* value_strip = value_tile + warp * kFragment * kStride;

  Accumulator d_key[kColumnFragments];
  Accumulator d_value[kColumnFragments];
  zero<kHeadDim>(d_key);
  zero<kHeadDim>(d_value);

  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (int query_tile_index = key_tile_index; query_tile_index <= last_query_tile; ++query_tile_index) {
      const int q0 = query_tile_index * kTileRows;
      __syncthreads();  // every warp is done with the previous query tile
      load_tile<kHeadDim>(query_tile, q, batch, q0, seq, heads, head);
      load_tile<kHeadDim>(d_out_tile, d_out, batch, q0, seq, heads, head);
      load_row_values(lse_log2, lse, batch, head, heads, q0, seq, kLog2E);
      load_row_values(delta_rows, delta, batch, head, heads, q0, seq, 1.0f);
      __syncthreads();

      // For each 16 queries n: S^T = K Q^T and dP^T = V dO^T (this warp's 16 keys x 16 queries), then
      // P^T = exp(S^T scale - lse) where visible, dS^T = P^T (dP^T - delta) scale, staged as bf16.
#pragma unroll 1
      for (int n = 0; n < kTileFragments; ++n) {
        Accumulator s;
        Accumulator dp;
        nvcuda::wmma::fill_fragment(s, 0.0f);
        nvcuda::wmma::fill_fragment(dp, 0.0f);
        mma_rows_by_rows<kHeadDim>(s, key_strip, query_tile + n * kFragment * kStride);
        mma_rows_by_rows<kHeadDim>(dp, value_strip, d_out_tile + n * kFragment * kStride);
#pragma unroll
        for (int i = 0; i < kAccumulatorElements; ++i) {
          const int column = n * kFragment + at.col[i];  // query q0 + column
          const bool seen = q0 + column < seq && visible(q0 + column, warp_key0 + at.row[i], window);
          const float p = seen ? exp2f(s.x[i] * scale_log2 - lse_log2[column]) : 0.0f;
          const float ds = p * (dp.x[i] - delta_rows[column]) * scale;
          probabilities[at.row[i] * kStripStride + column] = __float2bfloat16_rn(p);
          score_gradients[at.row[i] * kStripStride + column] = __float2bfloat16_rn(ds);
        }
      }
      __syncwarp();
      mma_strip_by_tile<kHeadDim>(d_value, probabilities, d_out_tile);  // dV += P^T dO
      mma_strip_by_tile<kHeadDim>(d_key, score_gradients, query_tile);  // dK += dS^T Q scale
      __syncwarp();  // the strips are rewritten for the next query tile
    }
  }
  store_rows<kHeadDim>(d_k, d_key, at, batch, warp_key0, seq, kv_heads, kv_head);
  store_rows<kHeadDim>(d_v, d_value, at, batch, warp_key0, seq, kv_heads, kv_head);
}

// Dynamic shared memory of the dQ kernel, as byte offsets (each a multiple of 128).
template <int kHeadDim>
struct QueryShared {
  static constexpr int kQuery = 0;
  static constexpr int kDOut = kQuery + kTileBytes<kHeadDim>;
  static constexpr int kKey = kDOut + kTileBytes<kHeadDim>;
  static constexpr int kValue = kKey + kTileBytes<kHeadDim>;
  static constexpr int kLse = kValue + kTileBytes<kHeadDim>;      // 64 f32, times log2(e)
  static constexpr int kDelta = kLse + kTileRows * 4;             // 64 f32
  static constexpr int kScoreGradients = kDelta + kTileRows * 4;  // per warp (16, 64) bf16: dS * scale
  static constexpr int kCoordinates = kScoreGradients + kWarps * kStripBytes;
  static constexpr int kBytes = kCoordinates + kCoordinateTableBytes;
  static_assert(kBytes <= kMaxSharedBytes, "dQ tiles exceed the shared memory of one GB10 block");
  static_assert(regions_aligned({kDOut, kKey, kValue, kLse, kDelta, kScoreGradients, kCoordinates}));
};

// d_q, d_out, q (B, T, H, D) bf16; k, v (B, T, Hkv, D) bf16; lse, delta (B, H, T) f32. Grid (query tiles, H,
// B), the last query tile first. Warp w owns queries t0 + 16w .. + 15.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_backward_query_kernel(BF16* d_q, const BF16* d_out, const BF16* q, const BF16* k, const BF16* v,
                                    const float* lse, const float* delta, int seq, int heads, int kv_heads,
                                    int window, float scale, float scale_log2) {
  using Shared = QueryShared<kHeadDim>;
  constexpr int kStride = kTileStride<kHeadDim>;
  constexpr int kColumnFragments = kHeadDim / kFragment;
  NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128);
  BF16* query_tile = reinterpret_cast<BF16*>(shared + Shared::kQuery);
  BF16* d_out_tile = reinterpret_cast<BF16*>(shared + Shared::kDOut);
  BF16* key_tile = reinterpret_cast<BF16*>(shared + Shared::kKey);
  BF16* value_tile = reinterpret_cast<BF16*>(shared + Shared::kValue);
  float* lse_log2 = reinterpret_cast<float*>(shared + Shared::kLse);
  float* delta_rows = reinterpret_cast<float*>(shared + Shared::kDelta);
  float* coordinate_tables = reinterpret_cast<float*>(shared + Shared::kCoordinates);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  BF16* score_gradients = reinterpret_cast<BF16*>(shared + Shared::kScoreGradients + warp * kStripBytes);

  const int query_tile_index = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int kv_head = head / (heads / kv_heads);
  const int t0 = query_tile_index * kTileRows;
  const int first_key_tile = max(0, t0 - window) / kTileRows;

  write_coordinate_tables(coordinate_tables);
  load_tile<kHeadDim>(query_tile, q, batch, t0, seq, heads, head);
  load_tile<kHeadDim>(d_out_tile, d_out, batch, t0, seq, heads, head);
  load_row_values(lse_log2, lse, batch, head, heads, t0, seq, kLog2E);
  load_row_values(delta_rows, delta, batch, head, heads, t0, seq, 1.0f);
  __syncthreads();
  const FragmentCoordinates at = read_coordinates(coordinate_tables);
  const int warp_row0 = warp * kFragment;  // the warp's first row within the tile
  const BF16* query_strip = query_tile + warp_row0 * kStride;
  const BF16* d_out_strip = d_out_tile + warp_row0 * kStride;

  Accumulator d_query[kColumnFragments];
  zero<kHeadDim>(d_query);

  for (int key_tile_index = first_key_tile; key_tile_index <= query_tile_index; ++key_tile_index) {
    const int key0 = key_tile_index * kTileRows;
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_tile<kHeadDim>(key_tile, k, batch, key0, seq, kv_heads, kv_head);
    load_tile<kHeadDim>(value_tile, v, batch, key0, seq, kv_heads, kv_head);
    __syncthreads();

    // For each 16 keys n: S = Q K^T and dP = dO V^T (this warp's 16 queries x 16 keys), then
    // dS = P (dP - delta) scale with P = exp(S scale - lse) where visible, staged as bf16.
#pragma unroll 1
    for (int n = 0; n < kTileFragments; ++n) {
      Accumulator s;
      Accumulator dp;
      nvcuda::wmma::fill_fragment(s, 0.0f);
      nvcuda::wmma::fill_fragment(dp, 0.0f);
      mma_rows_by_rows<kHeadDim>(s, query_strip, key_tile + n * kFragment * kStride);
      mma_rows_by_rows<kHeadDim>(dp, d_out_strip, value_tile + n * kFragment * kStride);
#pragma unroll
      for (int i = 0; i < kAccumulatorElements; ++i) {
        const int row = warp_row0 + at.row[i];  // query t0 + row
        const int column = n * kFragment + at.col[i];
        const bool seen = t0 + row < seq && visible(t0 + row, key0 + column, window);
        const float p = seen ? exp2f(s.x[i] * scale_log2 - lse_log2[row]) : 0.0f;
        score_gradients[at.row[i] * kStripStride + column] =
            __float2bfloat16_rn(p * (dp.x[i] - delta_rows[row]) * scale);
      }
    }
    __syncwarp();
    mma_strip_by_tile<kHeadDim>(d_query, score_gradients, key_tile);  // dQ += dS K scale
    __syncwarp();  // the strip is rewritten for the next key tile
  }
  store_rows<kHeadDim>(d_q, d_query, at, batch, t0 + warp_row0, seq, heads, head);
}

}  // namespace

void attention_backward(TensorView d_q, TensorView d_k, TensorView d_v, TensorView d_out, TensorView q,
                        TensorView k, TensorView v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace) {
  constexpr const char* kOp = "attention_backward";
  const AttentionShape shape = check_attention(q, k, v, out, lse, window, kOp);
  check_tensor(d_q, DType::kBF16, kOp, "d_q");
  check_tensor(d_k, DType::kBF16, kOp, "d_k");
  check_tensor(d_v, DType::kBF16, kOp, "d_v");
  check_tensor(d_out, DType::kBF16, kOp, "d_out");
  check_same_shape(d_q, q, kOp);
  check_same_shape(d_out, q, kOp);
  check_same_shape(d_k, k, kOp);
  check_same_shape(d_v, v, kOp);
  check_aligned(d_q, kOp, "d_q");
  check_aligned(d_k, kOp, "d_k");
  check_aligned(d_v, kOp, "d_v");
  check_aligned(d_out, kOp, "d_out");
  check_on_gpu(workspace, kOp, "workspace");
  const int64_t delta_bytes =
      attention_workspace_bytes(shape.batch, shape.seq, shape.heads, shape.kv_heads, shape.head_dim, window);
  NANOFORGE_CHECK(workspace.bytes() >= delta_bytes,
                  "{} on CUDA: workspace {} holds {} bytes, needs {} (ops::attention_workspace_bytes)", kOp,
                  workspace.describe(), workspace.bytes(), delta_bytes);
  check_aligned(workspace, kOp, "workspace");
  const int64_t rows = static_cast<int64_t>(shape.batch) * shape.seq * shape.heads;
  if (rows == 0) return;
  float* delta = workspace.as<float>();

  const int64_t delta_blocks = (rows + kDeltaRowsPerBlock - 1) / kDeltaRowsPerBlock;
  NANOFORGE_CHECK(delta_blocks <= std::numeric_limits<int>::max(), "{} on CUDA: q {} has too many rows", kOp,
                  q.describe());
  launch_kernel<attention_delta_kernel>(static_cast<unsigned>(delta_blocks), kDeltaRowsPerBlock * kWarpSize)(
      delta, d_out.as<BF16>(), out.as<BF16>(), rows, shape.seq, shape.heads, shape.head_dim);
  NANOFORGE_CUDA_CHECK_LAUNCH("attention_delta");

  const float scale_f = static_cast<float>(scale);
  const float scale_log2 = scale_f * kLog2E;
  with_head_dim(shape.head_dim, [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    constexpr int kKeyValueBytes = KeyValueShared<kHeadDim>::kBytes;
    allow_shared_bytes(attention_backward_key_value_kernel<kHeadDim>, kKeyValueBytes);
    launch_kernel<attention_backward_key_value_kernel<kHeadDim>>(
        dim3(tile_count(shape.seq), shape.kv_heads, shape.batch), kThreads, kKeyValueBytes)(
        d_k.as<BF16>(), d_v.as<BF16>(), d_out.as<BF16>(), q.as<BF16>(), k.as<BF16>(), v.as<BF16>(),
        lse.as<float>(), delta, shape.seq, shape.heads, shape.kv_heads, shape.window, scale_f, scale_log2);
    NANOFORGE_CUDA_CHECK_LAUNCH("attention_backward_key_value");

    constexpr int kQueryBytes = QueryShared<kHeadDim>::kBytes;
    allow_shared_bytes(attention_backward_query_kernel<kHeadDim>, kQueryBytes);
    launch_kernel<attention_backward_query_kernel<kHeadDim>>(
        dim3(tile_count(shape.seq), shape.heads, shape.batch), kThreads, kQueryBytes)(
        d_q.as<BF16>(), d_out.as<BF16>(), q.as<BF16>(), k.as<BF16>(), v.as<BF16>(), lse.as<float>(), delta,
        shape.seq, shape.heads, shape.kv_heads, shape.window, scale_f, scale_log2);
    NANOFORGE_CUDA_CHECK_LAUNCH("attention_backward_query");
  });
}

}  // namespace nanoforge::cuda
