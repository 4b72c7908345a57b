// Token embedding lookup and its scatter-add backward on the GPU, the CUDA twin of kernels/cpu/embedding.cpp:
// out (N, C) bf16 = table (V, C) f32 [ids (N) i32], and d_table (V, C) f32 += d_out (N, C) bf16 rows
// scattered by ids. Ids are not checked on the device: as the op contract says, they must lie in [0, V) (an
// id outside reads or writes outside the table). Forward: one warp per token row. Backward: one warp per
// token row with fp32 atomics by default (fast; the order of additions changes from run to run), or, under
// settings.deterministic, every table element summed in token order as the CPU does (the same bits) by
// warps that each own a column slab and an id bucket: docs/kernels.md, "Embedding".
#include <algorithm>
#include <bit>
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // gather and atomic scatter: one warp per token row, 256 threads
constexpr int kThreadsPerBlock = kRowsPerBlock * kWarpSize;

// The ordered backward: 4 warps (128 threads) per block, each with its own token list in shared memory.
constexpr int kOrderedWarpsPerBlock = 4;
// Columns per lane when the views allow packs: one 16-byte f32 table pack and one 8-byte bf16 d_out pack.
constexpr int kOrderedColumnsPerLane = kElementsPer16Bytes<float>;
constexpr int kChunksPerRound = 8;  // a warp loads 8 x 32 = 256 ids at once
constexpr int kTokensPerRound = kChunksPerRound * kWarpSize;
constexpr int kRowsInFlight = 4;  // d_out rows a lane loads before adding the first of them
// About 30 warps per SM on an H200, enough to hide the latency of each warp's walk over the tokens; the
// number of id buckets is chosen to reach it.
constexpr int kOrderedTargetWarps = 4096;

// out: (rows, channels) bf16; table: (vocab, channels) f32; ids: (rows) i32. Lane l of a row's warp converts
// packs l, l + 32, ... of kCount columns.
template <int kCount>
__global__ void embedding_forward_kernel(__nv_bfloat16* __restrict__ out, const float* __restrict__ table,
                                         const int32_t* __restrict__ ids, int64_t rows, int channels) {
  const int lane = threadIdx.x % kWarpSize;
  const int packs = channels / kCount;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const float* table_row = table + static_cast<int64_t>(ids[row]) * channels;
    __nv_bfloat16* out_row = out + row * channels;
    for (int p = lane; p < packs; p += kWarpSize) {
      float values[kCount];
      load_floats<kCount>(table_row, p, values);
      Pack<__nv_bfloat16, kCount> result;
#pragma unroll
      for (int k = 0; k < kCount; ++k)
        result.values[k] = __float2bfloat16_rn(values[k]);
      pack_at<kCount>(out_row, p) = result;
    }
  }
}

// d_table: (vocab, channels) f32 += d_out: (rows, channels) bf16 at row ids[row], by fp32 atomics. Lane l of
// a row's warp adds packs l, l + 32, ... of kCount columns.
template <int kCount>
__global__ void embedding_backward_atomic_kernel(float* __restrict__ d_table,
                                                 const __nv_bfloat16* __restrict__ d_out,
                                                 const int32_t* __restrict__ ids, int64_t rows,
                                                 int channels) {
  const int lane = threadIdx.x % kWarpSize;
  const int packs = channels / kCount;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    float* table_row = d_table + static_cast<int64_t>(ids[row]) * channels;
    const __nv_bfloat16* grad_row = d_out + row * channels;
    for (int p = lane; p < packs; p += kWarpSize) {
      const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(grad_row, p);
#pragma unroll
      for (int k = 0; k < kCount; ++k)
        atomicAdd(table_row + p * kCount + k, __bfloat162float(grad.values[k]));
    }
  }
}

// d_table: (vocab, channels) f32 += d_out: (rows, channels) bf16 scattered by ids, each element summed in
// token order. Warp w owns columns [(slab * 32 + lane) * kCount, + kCount) for lane 0..31, slab = w % slabs,
// and the ids with id % buckets == bucket, bucket = w / slabs (buckets is a power of two). kCount divides
// channels, so a lane's columns are all inside the table or all outside (then it only helps list tokens).
template <int kCount>
__global__ void __launch_bounds__(kOrderedWarpsPerBlock* kWarpSize)
    embedding_backward_ordered_kernel(float* __restrict__ d_table, const __nv_bfloat16* __restrict__ d_out,
                                      const int32_t* __restrict__ ids, int64_t rows, int channels, int slabs,
                                      int buckets) {
  // Per warp: the round's tokens in this bucket, in token order (position in the round, and id).
  __shared__ int list_position[kOrderedWarpsPerBlock][kTokensPerRound];
  __shared__ int32_t list_id[kOrderedWarpsPerBlock][kTokensPerRound];

  const int warp_in_block = threadIdx.x / kWarpSize;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kOrderedWarpsPerBlock + warp_in_block;
  if (warp >= static_cast<int64_t>(slabs) * buckets) return;  // whole warps leave, so ballots stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int slab = static_cast<int>(warp % slabs);
  const int bucket = static_cast<int>(warp / slabs);
  const int column = (slab * kWarpSize + lane) * kCount;
  const bool active = column < channels;
  const unsigned lanes_below = (1u << lane) - 1u;
  int* positions = list_position[warp_in_block];
  int32_t* listed_ids = list_id[warp_in_block];

  // The running sum of row `current` of the table at this lane's columns (current = -1: none yet).
  float sum[kCount];
  int32_t current = -1;

  for (int64_t round = 0; round < rows; round += kTokensPerRound) {
    // Load the round's ids first (independent loads, one latency), then list those in this bucket.
    int32_t lane_ids[kChunksPerRound];
#pragma unroll
    for (int chunk = 0; chunk < kChunksPerRound; ++chunk) {
      const int64_t token = round + chunk * kWarpSize + lane;
      lane_ids[chunk] = token < rows ? ids[token] : -1;
    }
    int listed = 0;  // the same in every lane
#pragma unroll
    for (int chunk = 0; chunk < kChunksPerRound; ++chunk) {
      const bool mine = lane_ids[chunk] >= 0 && (lane_ids[chunk] & (buckets - 1)) == bucket;
      const unsigned mask = __ballot_sync(0xffffffffu, mine);
      if (mine) {
        const int slot = listed + __popc(mask & lanes_below);
        positions[slot] = chunk * kWarpSize + lane;
        listed_ids[slot] = lane_ids[chunk];
      }
      listed += __popc(mask);
    }
    __syncwarp();  // the list is written; every lane reads all of it

    if (active) {
      for (int first = 0; first < listed; first += kRowsInFlight) {
        int32_t row_ids[kRowsInFlight];
        Pack<__nv_bfloat16, kCount> grads[kRowsInFlight] = {};
#pragma unroll
        for (int k = 0; k < kRowsInFlight; ++k) {
          row_ids[k] = first + k < listed ? listed_ids[first + k] : -1;
          if (row_ids[k] >= 0) {
            const int64_t token = round + positions[first + k];
            grads[k] = pack_at<kCount>(d_out + token * channels + column, 0);
          }
        }
#pragma unroll
        for (int k = 0; k < kRowsInFlight; ++k) {
          if (row_ids[k] < 0) continue;
          if (row_ids[k] != current) {
            if (current >= 0)
              store_floats<kCount>(d_table + static_cast<int64_t>(current) * channels + column, 0, sum);
            current = row_ids[k];
            load_floats<kCount>(d_table + static_cast<int64_t>(current) * channels + column, 0, sum);
          }
#pragma unroll
          for (int c = 0; c < kCount; ++c)
            sum[c] += __bfloat162float(grads[k].values[c]);
        }
      }
    }
    __syncwarp();  // every lane has read the list before the next round overwrites it
  }
  if (active && current >= 0) {
    store_floats<kCount>(d_table + static_cast<int64_t>(current) * channels + column, 0, sum);
  }
}

// The (vocab, channels) of a table and the token count, checked against out / d_out and the kernels' index
// types.
struct EmbeddingShape {
  int64_t rows;
  int64_t vocab;
  int channels;
};

EmbeddingShape embedding_shape(const TensorView& table, const TensorView& rows_view, const TensorView& ids,
                               const char* op, const char* table_name, const char* rows_name) {
  check_rank(table, 2, op, table_name);
  const int64_t vocab = table.shape[0];
  const int64_t channels = table.shape[1];
  const int64_t rows = ids.numel();
  NANOFORGE_CHECK(vocab > 0 && vocab <= std::numeric_limits<int32_t>::max() && channels > 0 &&
                      channels <= std::numeric_limits<int>::max() / kWarpSize,
                  "{} on CUDA: {} {} must have 1 to 2^31 - 1 rows (i32 ids) and 1 to 2^26 - 1 columns", op,
                  table_name, table.describe());
  NANOFORGE_CHECK(rows_view.numel() == rows * channels, "{} on CUDA: {} {} does not hold {} rows of {}", op,
                  rows_name, rows_view.describe(), rows, channels);
  return {rows, vocab, static_cast<int>(channels)};
}

void launch_ordered_backward(TensorView d_table, TensorView d_out, TensorView ids,
                             const EmbeddingShape& shape) {
  const bool packable = rows_packable<float>(shape.channels, {d_table.data, d_out.data});
  const int columns_per_lane = packable ? kOrderedColumnsPerLane : 1;
  const int columns_per_warp = kWarpSize * columns_per_lane;
  const int slabs = (shape.channels + columns_per_warp - 1) / columns_per_warp;
  // A power of two, so a bucket is id & (buckets - 1); no more buckets than ids.
  const int64_t wanted = std::max<int64_t>(1, kOrderedTargetWarps / slabs);
  const int buckets = static_cast<int>(std::min(std::bit_floor(static_cast<uint64_t>(wanted)),
                                                std::bit_ceil(static_cast<uint64_t>(shape.vocab))));
  const int64_t warps = static_cast<int64_t>(slabs) * buckets;
  const int blocks = static_cast<int>((warps + kOrderedWarpsPerBlock - 1) / kOrderedWarpsPerBlock);
  with_pack_count<float>(packable, [&](auto count) {
    launch_kernel<embedding_backward_ordered_kernel<decltype(count)::value>>(
        blocks, kOrderedWarpsPerBlock * kWarpSize)(d_table.as<float>(), d_out.as<__nv_bfloat16>(),
                                                   ids.as<int32_t>(), shape.rows, shape.channels, slabs,
                                                   buckets);
  });
}

}  // namespace

void embedding_forward(TensorView out, TensorView table, TensorView ids) {
  constexpr const char* kOp = "embedding_forward";
  check_tensor(out, DType::kBF16, kOp, "out");
  check_tensor(table, DType::kF32, kOp, "table");
  check_tensor(ids, DType::kI32, kOp, "ids");
  const EmbeddingShape shape = embedding_shape(table, out, ids, kOp, "table", "out");
  if (shape.rows == 0) return;
  const bool packable = rows_packable<__nv_bfloat16>(shape.channels, {out.data, table.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<embedding_forward_kernel<decltype(count)::value>>(blocks_for(shape.rows, kRowsPerBlock),
                                                                    kThreadsPerBlock)(
        out.as<__nv_bfloat16>(), table.as<float>(), ids.as<int32_t>(), shape.rows, shape.channels);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void embedding_backward(TensorView d_table, TensorView d_out, TensorView ids,
                        const ops::KernelSettings& settings) {
  constexpr const char* kOp = "embedding_backward";
  check_tensor(d_table, DType::kF32, kOp, "d_table");
  check_tensor(d_out, DType::kBF16, kOp, "d_out");
  check_tensor(ids, DType::kI32, kOp, "ids");
  const EmbeddingShape shape = embedding_shape(d_table, d_out, ids, kOp, "d_table", "d_out");
  if (shape.rows == 0) return;
  if (settings.deterministic) {
    launch_ordered_backward(d_table, d_out, ids, shape);
  } else {
    const bool packable = rows_packable<__nv_bfloat16>(shape.channels, {d_out.data});
    with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
      launch_kernel<embedding_backward_atomic_kernel<decltype(count)::value>>(
          blocks_for(shape.rows, kRowsPerBlock), kThreadsPerBlock)(
          d_table.as<float>(), d_out.as<__nv_bfloat16>(), ids.as<int32_t>(), shape.rows, shape.channels);
    });
  }
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
