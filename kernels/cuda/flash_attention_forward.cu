// Causal sliding-window attention forward on the GPU, the CUDA twin of kernels/cpu/attention.cpp:
// FlashAttention-2 with online softmax. One block of four warps per (batch, head, 64-query tile); it walks
// the 64-key tiles from the first one its window reaches to the diagonal (tiles wholly outside the window are
// never touched, so short-window layers cost what their window says). Per key tile each warp computes its 16
// query rows' scores S = Q K^T on tensor cores (bf16 in, fp32 out), stages them in shared memory, where two
// lanes per row mask them, update the running max and sum, and write P = exp(S - max) rounded to bf16; the
// warp then rescales its fp32 output fragments by exp(old max - new max) and adds P V. At the end the rows
// are divided by their sums and lse = max + log(sum) is saved. No T x T matrix exists anywhere.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/launch.cuh"

namespace nanoforge::cuda {
namespace {

using namespace flash;

// Dynamic shared memory of the forward kernel, as byte offsets (each a multiple of 128).
template <int kHeadDim>
struct ForwardShared {
  static constexpr int kQuery = 0;
  static constexpr int kKey = kQuery + kTileBytes<kHeadDim>;
  static constexpr int kValue = kKey + kTileBytes<kHeadDim>;
  static constexpr int kScores = kValue + kTileBytes<kHeadDim>;               // per warp (16, 64) f32
  static constexpr int kProbabilities = kScores + kWarps * kScoreStripBytes;  // per warp (16, 64) bf16
  static constexpr int kRowScale = kProbabilities + kWarps * kStripBytes;     // per warp 16 f32
  static constexpr int kCoordinates = kRowScale + kWarps * kFragment * 4;
  static constexpr int kBytes = kCoordinates + kCoordinateTableBytes;
  static_assert(kBytes <= kMaxSharedBytes, "forward tiles exceed the shared memory of one GB10 block");
  static_assert(regions_aligned({kKey, kValue, kScores, kProbabilities, kRowScale, kCoordinates}));
};

// q, out (B, T, H, D) bf16; k, v (B, T, Hkv, D) bf16; lse (B, H, T) f32. Grid (query tiles, H, B), the
// last query tile first (it has the most keys). scale_log2 = scale * log2(e): the kernel works in base 2.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(BF16* out, float* lse, const BF16* q, const BF16* k, const BF16* v, int seq,
                             int heads, int kv_heads, int window, float scale_log2) {
  using Shared = ForwardShared<kHeadDim>;
  constexpr int kStride = kTileStride<kHeadDim>;
  constexpr int kColumnFragments = kHeadDim / kFragment;
  NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128);
  BF16* query_tile = reinterpret_cast<BF16*>(shared + Shared::kQuery);
  BF16* key_tile = reinterpret_cast<BF16*>(shared + Shared::kKey);
  BF16* value_tile = reinterpret_cast<BF16*>(shared + Shared::kValue);
  float* coordinate_tables = reinterpret_cast<float*>(shared + Shared::kCoordinates);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  float* scores = reinterpret_cast<float*>(shared + Shared::kScores + warp * kScoreStripBytes);
  BF16* probabilities = reinterpret_cast<BF16*>(shared + Shared::kProbabilities + warp * kStripBytes);
  float* row_scale = reinterpret_cast<float*>(shared + Shared::kRowScale) + warp * kFragment;

  const int query_tile_index = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int kv_head = head / (heads / kv_heads);
  const int t0 = query_tile_index * kTileRows;
  const int first_key_tile = max(0, t0 - window) / kTileRows;

  write_coordinate_tables(coordinate_tables);
  load_tile<kHeadDim>(query_tile, q, batch, t0, seq, heads, head);
  __syncthreads();
  const FragmentCoordinates at = read_coordinates(coordinate_tables);
  const BF16* query_strip = query_tile + warp * kFragment * kStride;

  // Softmax bookkeeping: lanes 2r and 2r + 1 share row r of the warp's strip, 32 columns each; both keep
  // the row's running max (base 2) and sum.
  const int row = lane / 2;
  const int half = lane % 2;
  const int t = t0 + warp * kFragment + row;
  float row_max = -INFINITY;
  float row_sum = 0.0f;

  Accumulator output[kColumnFragments];
  zero<kHeadDim>(output);

  for (int key_tile_index = first_key_tile; key_tile_index <= query_tile_index; ++key_tile_index) {
    const int key0 = key_tile_index * kTileRows;
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_tile<kHeadDim>(key_tile, k, batch, key0, seq, kv_heads, kv_head);
    load_tile<kHeadDim>(value_tile, v, batch, key0, seq, kv_heads, kv_head);
    __syncthreads();

    // S = Q K^T for this warp's 16 queries and the tile's 64 keys.
#pragma unroll
    for (int n = 0; n < kTileFragments; ++n) {
      Accumulator s;
      nvcuda::wmma::fill_fragment(s, 0.0f);
      mma_rows_by_rows<kHeadDim>(s, query_strip, key_tile + n * kFragment * kStride);
      nvcuda::wmma::store_matrix_sync(scores + n * kFragment, s, kScoreStride, nvcuda::wmma::mem_row_major);
    }
    __syncwarp();

    float x[kTileRows / 2];
    const int column0 = half * (kTileRows / 2);
    const float* score_row = scores + row * kScoreStride + column0;
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kTileRows / 2; c += 4) {
      const float4 four = *reinterpret_cast<const float4*>(score_row + c);
      const float values[4] = {four.x, four.y, four.z, four.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        x[c + e] = visible(t, key0 + column0 + c + e, window) ? values[e] * scale_log2 : -INFINITY;
        tile_max = fmaxf(tile_max, x[c + e]);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float new_max = fmaxf(row_max, tile_max);
    // A row that has seen no visible key yet keeps max -inf; exponentiate against 0 so that its
    // probabilities and the rescale factor come out 0 rather than NaN.
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    const float rescale = exp2f(row_max - base);
    float tile_sum = 0.0f;
    BF16* probability_row = probabilities + row * kStripStride + column0;
#pragma unroll
    for (int c = 0; c < kTileRows / 2; c += 2) {
      const float p0 = exp2f(x[c] - base);
      const float p1 = exp2f(x[c + 1] - base);
      tile_sum += p0 + p1;
      *reinterpret_cast<__nv_bfloat162*>(probability_row + c) = __floats2bfloat162_rn(p0, p1);
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    row_sum = row_sum * rescale + tile_sum;
    row_max = new_max;
    if (half == 0) row_scale[row] = rescale;
    __syncwarp();

    // O = O * rescale + P V.
#pragma unroll
    for (int i = 0; i < kAccumulatorElements; ++i) {
      const float factor = row_scale[at.row[i]];
#pragma unroll
      for (int n = 0; n < kColumnFragments; ++n)
        output[n].x[i] *= factor;
    }
    mma_strip_by_tile<kHeadDim>(output, probabilities, value_tile);
  }

  // out = O / sum, lse = max + log(sum). Rows past the sequence ran on zero padding and are not stored.
  __syncwarp();  // every lane has read row_scale
  if (half == 0) {
    row_scale[row] = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
    if (t < seq) lse[(static_cast<int64_t>(batch) * heads + head) * seq + t] = row_max * kLn2 + logf(row_sum);
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < kAccumulatorElements; ++i) {
    const float factor = row_scale[at.row[i]];
#pragma unroll
    for (int n = 0; n < kColumnFragments; ++n)
      output[n].x[i] *= factor;
  }
  store_rows<kHeadDim>(out, output, at, batch, t0 + warp * kFragment, seq, heads, head);
}

}  // namespace

int64_t attention_workspace_bytes(int64_t batch, int64_t seq, int64_t heads, int64_t /*kv_heads*/,
                                  int64_t /*head_dim*/, int64_t /*window*/) {
  // The backward's delta = rowsum(dO * O), (B, H, T) f32; the forward needs none.
  return batch * heads * seq * static_cast<int64_t>(sizeof(float));
}

void attention_forward(TensorView out, TensorView lse, TensorView q, TensorView k, TensorView v,
                       int64_t window, double scale, TensorView /*workspace*/) {
  constexpr const char* kOp = "attention_forward";
  const AttentionShape shape = check_attention(q, k, v, out, lse, window, kOp);
  if (static_cast<int64_t>(shape.batch) * shape.seq * shape.heads == 0) return;
  const dim3 grid(tile_count(shape.seq), shape.heads, shape.batch);
  const float scale_log2 = static_cast<float>(scale) * kLog2E;
  with_head_dim(shape.head_dim, [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    constexpr int kBytes = ForwardShared<kHeadDim>::kBytes;
    allow_shared_bytes(attention_forward_kernel<kHeadDim>, kBytes);
    launch_kernel<attention_forward_kernel<kHeadDim>>(grid, kThreads, kBytes)(
        out.as<BF16>(), lse.as<float>(), q.as<BF16>(), k.as<BF16>(), v.as<BF16>(), shape.seq, shape.heads,
        shape.kv_heads, shape.window, scale_log2);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
