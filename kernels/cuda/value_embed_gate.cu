// nanochat's gated value embeddings on the GPU, the CUDA twin of kernels/cpu/value_embed_gate.cpp: v (bf16)
// += 3 * sigmoid(u[:, :12] @ W^T) * table[ids] per kv head, with the fp32 table, gate weight and sigmoids.
// One warp per token walks its kv heads (a 128-wide head is one 4-element pack per lane: 8-byte bf16 and
// 16-byte fp32 loads). The backward's gate-weight gradient reduces over every token without atomics (per-warp
// sums in shared memory, per-block partials in device scratch, then an in-order fp64 sum per weight). The
// table gradient is scattered with fp32 atomics fused into the same pass, or, with settings.deterministic,
// by a second kernel in which each warp owns 32 table columns of the ids in one residue class mod 128 and
// adds their tokens in token order, the order of the CPU op.
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr float kGateRange = 3.0f;  // nanochat: gate = 3 * sigmoid(...), in (0, 3)
constexpr int kTokensPerBlock = 8;  // 256 threads, one warp per token
constexpr int kThreadsPerBlock = kTokensPerBlock * kWarpSize;
constexpr int kHeadPack = 4;  // elements per pack along a head: 4 bf16 of v, 4 fp32 of the table
// The backward's grid: at most this many blocks (about 8 resident per SM on a 132-SM H200), looping over
// tokens beyond that; it bounds the partials the final sum reads.
constexpr int64_t kMaxBackwardBlocks = 1024;
constexpr int kFinalSumThreads = 256;
// Deterministic table scatter: ids are split into this many residue classes, times width / 32 column groups,
// one warp each (5120 warps for d20's 1280 columns: one wave on an H200).
constexpr int kScatterResidues = 128;
constexpr int kMaxSharedBytes = 48 * 1024;  // dynamic shared memory available without an opt-in

// The op's dimensions: u (rows, channels), v (rows, kv_heads, head_dim) with rows v_row elements apart (v
// may be the v heads of the fused projection's output), gate_weight (kv_heads, gate_channels), table (vocab,
// kv_heads * head_dim).
struct GateDims {
  int64_t rows;
  int kv_heads, head_dim, channels, gate_channels;
  int64_t vocab;
  int64_t v_row;
};

__device__ inline float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// Stops the kernel (and with it the CUDA context: the next synchronising call reports a launch failure) on an
// id outside the table, which would otherwise read or write out of bounds. The CPU op reports it by name.
__device__ inline void check_id(int32_t id, int64_t vocab) {
  if (id < 0 || id >= vocab) __trap();
}

// v: (rows, kv_heads, head_dim) bf16, in place; gate_sigmoid: (rows, kv_heads) f32; u: (rows, channels) bf16;
// gate_weight: (kv_heads, G) f32, G <= 32; table: (vocab, kv_heads * head_dim) f32; ids: (rows) i32.
//   s[n, h] = sigmoid(u[n, :G] . gate_weight[h]);  v[n, h] += 3 s[n, h] table[ids[n], h * head_dim ...]
// Lane j < G holds u[n, j] for the gate dot products; head h's elements are head_dim / kCount packs.
template <int kCount>
__global__ void value_embed_gate_forward_kernel(__nv_bfloat16* v, float* gate_sigmoid, const __nv_bfloat16* u,
                                                const float* gate_weight, const float* table,
                                                const int32_t* ids, GateDims dims) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kTokensPerBlock + threadIdx.x / kWarpSize;
  if (n >= dims.rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int32_t id = ids[n];
  check_id(id, dims.vocab);
  const int64_t width = static_cast<int64_t>(dims.kv_heads) * dims.head_dim;
  const int packs = dims.head_dim / kCount;
  const float u_lane = lane < dims.gate_channels ? __bfloat162float(u[n * dims.channels + lane]) : 0.0f;

  for (int h = 0; h < dims.kv_heads; ++h) {
    float pre = lane < dims.gate_channels ? u_lane * gate_weight[h * dims.gate_channels + lane] : 0.0f;
    pre = warp_sum(pre);
    const float s = sigmoid(pre);
    if (lane == 0) gate_sigmoid[n * dims.kv_heads + h] = s;
    const float gate = kGateRange * s;
    __nv_bfloat16* v_head = v + n * dims.v_row + static_cast<int64_t>(h) * dims.head_dim;
    const float* embedding = table + id * width + static_cast<int64_t>(h) * dims.head_dim;
    for (int p = lane; p < packs; p += kWarpSize) {
      Pack<__nv_bfloat16, kCount> values = pack_at<kCount>(v_head, p);
      const Pack<float, kCount> added = pack_at<kCount>(embedding, p);
#pragma unroll
      for (int k = 0; k < kCount; ++k)
        values.values[k] = __float2bfloat16_rn(__bfloat162float(values.values[k]) + gate * added.values[k]);
      pack_at<kCount>(v_head, p) = values;
    }
  }
}

// d_u: (rows, channels) bf16, only [:, :G] added to; partials: (gridDim.x, kv_heads * G) f32, this block's
// sums of the gate-weight gradients; d_table: (vocab, kv_heads * head_dim) f32, scattered into with atomics
// when scatter_atomically (else untouched); d_v: (rows, kv_heads, head_dim) bf16; the rest as in the forward.
// Per token n and head h, with p = s[n, h]:
//   d_gate = d_v[n, h] . table[ids[n], h];  d_pre = d_gate * 3 p (1 - p)
//   d_u[n, :G] += sum_h d_pre gate_weight[h];  d_gate_weight[h] += d_pre u[n, :G]
//   d_table[ids[n], h] += 3 p d_v[n, h]
// Warp w of block b takes tokens b * 8 + w, then every gridDim.x * 8 further; lane j < G owns gate channel j.
// Dynamic shared memory: kTokensPerBlock * kv_heads * G floats, each warp's running gate-weight sums.
template <int kCount>
__global__ void value_embed_gate_backward_kernel(__nv_bfloat16* d_u, float* partials, float* d_table,
                                                 const __nv_bfloat16* d_v, const __nv_bfloat16* u,
                                                 const float* gate_sigmoid, const float* gate_weight,
                                                 const float* table, const int32_t* ids, GateDims dims,
                                                 bool scatter_atomically) {
  NANOFORGE_DYNAMIC_SHARED(float, warp_partials, alignof(float));  // [kTokensPerBlock][kv_heads * G]
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int values = dims.kv_heads * dims.gate_channels;
  for (int i = threadIdx.x; i < kTokensPerBlock * values; i += blockDim.x)
    warp_partials[i] = 0;
  __syncthreads();
  float* my_partials = warp_partials + warp * values;
  const int64_t width = static_cast<int64_t>(dims.kv_heads) * dims.head_dim;
  const int packs = dims.head_dim / kCount;
  const bool gate_lane = lane < dims.gate_channels;

  for (int64_t n = static_cast<int64_t>(blockIdx.x) * kTokensPerBlock + warp; n < dims.rows;
       n += static_cast<int64_t>(gridDim.x) * kTokensPerBlock) {
    const int32_t id = ids[n];
    check_id(id, dims.vocab);
    const float u_lane = gate_lane ? __bfloat162float(u[n * dims.channels + lane]) : 0.0f;
    float d_u_lane = 0;
    for (int h = 0; h < dims.kv_heads; ++h) {
      const float p = gate_sigmoid[n * dims.kv_heads + h];
      const float gate = kGateRange * p;
      const __nv_bfloat16* d_v_head = d_v + n * dims.v_row + static_cast<int64_t>(h) * dims.head_dim;
      const int64_t table_offset = id * width + static_cast<int64_t>(h) * dims.head_dim;
      float d_gate = 0;
      for (int q = lane; q < packs; q += kWarpSize) {
        const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(d_v_head, q);
        const Pack<float, kCount> embedding = pack_at<kCount>(table + table_offset, q);
#pragma unroll
        for (int k = 0; k < kCount; ++k) {
          const float g = __bfloat162float(grad.values[k]);
          d_gate += g * embedding.values[k];
          if (scatter_atomically) atomicAdd(d_table + table_offset + q * kCount + k, gate * g);
        }
      }
      d_gate = warp_sum(d_gate);
      const float d_pre = d_gate * kGateRange * p * (1.0f - p);
      if (gate_lane) {
        d_u_lane += d_pre * gate_weight[h * dims.gate_channels + lane];
        my_partials[h * dims.gate_channels + lane] += d_pre * u_lane;
      }
    }
    if (gate_lane) {
      __nv_bfloat16* d_u_value = d_u + n * dims.channels + lane;
      *d_u_value = __float2bfloat16_rn(__bfloat162float(*d_u_value) + d_u_lane);
    }
  }

  __syncthreads();
  for (int i = threadIdx.x; i < values; i += blockDim.x) {
    float block_total = 0;
    for (int w = 0; w < kTokensPerBlock; ++w)
      block_total += warp_partials[w * values + i];
    partials[static_cast<int64_t>(blockIdx.x) * values + i] = block_total;
  }
}

// The deterministic table scatter: d_table[ids[n], c] += 3 s[n, c / head_dim] d_v[n, c] for every token n in
// token order. Warp i owns residue class r = i % kScatterResidues and columns (i / kScatterResidues) * 32 +
// lane; it scans the ids 32 at a time (a ballot marks those in its class) and adds the marked tokens in
// order. No other warp writes those (id, column) elements, so there are no races and the order is fixed.
__global__ void scatter_table_in_token_order_kernel(float* d_table, const __nv_bfloat16* d_v,
                                                    const float* gate_sigmoid, const int32_t* ids,
                                                    GateDims dims) {
  const int64_t warp_index = static_cast<int64_t>(blockIdx.x) * kTokensPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int residue = static_cast<int>(warp_index % kScatterResidues);
  const int64_t width = static_cast<int64_t>(dims.kv_heads) * dims.head_dim;
  const int64_t first_column = warp_index / kScatterResidues * kWarpSize;
  if (first_column >= width) return;  // the whole warp leaves together, so the ballots below stay full-warp
  const int64_t column = first_column + lane;
  const bool column_in_table = column < width;
  const int head = static_cast<int>(column / dims.head_dim);

  for (int64_t base = 0; base < dims.rows; base += kWarpSize) {
    const int64_t n = base + lane;
    const int32_t id = n < dims.rows ? ids[n] : -1;
    unsigned marked = __ballot_sync(0xffffffffu, id >= 0 && id % kScatterResidues == residue);
    while (marked != 0) {  // the same mask in every lane, so the whole warp loops together
      const int k = __ffs(static_cast<int>(marked)) - 1;
      marked &= marked - 1;
      const int32_t token_id = __shfl_sync(0xffffffffu, id, k);
      check_id(token_id, dims.vocab);
      const int64_t token = base + k;
      if (column_in_table) {
        const float gate = kGateRange * gate_sigmoid[token * dims.kv_heads + head];
        d_table[token_id * width + column] += gate * __bfloat162float(d_v[token * dims.v_row + column]);
      }
    }
  }
}

GateDims gate_dims(const HeadSlice& v, const TensorView& gate_sigmoid, const TensorView& u,
                   const TensorView& gate_weight, const TensorView& table, const TensorView& ids,
                   const char* op) {
  check_rank(u, 2, op, "u");
  check_rank(gate_weight, 2, op, "gate_weight");
  check_rank(table, 2, op, "table");
  const int64_t rows = v.batch() * v.seq(), kv_heads = v.heads(), head_dim = v.head_dim();
  const int64_t channels = u.shape[1], gate_channels = gate_weight.shape[1];
  NANOFORGE_CHECK(
      gate_weight.shape[0] == kv_heads && table.shape[1] == kv_heads * head_dim && u.shape[0] == rows &&
          ids.numel() == rows && gate_sigmoid.numel() == rows * kv_heads && gate_channels <= channels,
      "{} on CUDA: inconsistent shapes v {}, gate_weight {}, table {}, u {}, ids {}, gate_sigmoid {}", op,
      v.describe(), gate_weight.describe(), table.describe(), u.describe(), ids.describe(),
      gate_sigmoid.describe());
  NANOFORGE_CHECK(kv_heads >= 1 && head_dim >= 1, "{} on CUDA: v {} must have at least one head and element",
                  op, v.describe());
  // Lane j of a warp owns gate channel j; the index math is in int for heads and channels.
  NANOFORGE_CHECK(gate_channels >= 1 && gate_channels <= kWarpSize,
                  "{} on CUDA: gate_weight {} must read 1 to {} channels", op, gate_weight.describe(),
                  kWarpSize);
  NANOFORGE_CHECK(
      kv_heads * head_dim <= std::numeric_limits<int>::max() && channels <= std::numeric_limits<int>::max(),
      "{} on CUDA: v {} or u {} is too wide", op, v.describe(), u.describe());
  NANOFORGE_CHECK(int64_t{kTokensPerBlock} * kv_heads * gate_channels * static_cast<int64_t>(sizeof(float)) <=
                      kMaxSharedBytes,
                  "{} on CUDA: gate_weight {} has too many elements for the backward's shared memory", op,
                  gate_weight.describe());
  NANOFORGE_CHECK((rows + kTokensPerBlock - 1) / kTokensPerBlock <= std::numeric_limits<int>::max(),
                  "{} on CUDA: v {} has too many rows for one launch", op, v.describe());
  return {rows,
          static_cast<int>(kv_heads),
          static_cast<int>(head_dim),
          static_cast<int>(channels),
          static_cast<int>(gate_channels),
          table.shape[0],
          v.row_elements()};
}

// Whether kHeadPack elements per pack may be used: every head of v (bf16) and of the table (fp32) starts on
// a pack boundary.
bool heads_packable(const GateDims& dims, std::initializer_list<const void*> pointers) {
  return dims.head_dim % kHeadPack == 0 && pack_aligned(pointers);
}

}  // namespace

void value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                              TensorView table, TensorView ids) {
  constexpr const char* kOp = "value_embed_gate_forward";
  check_tensor(v.whole, DType::kBF16, kOp, "v");
  check_tensor(gate_sigmoid, DType::kF32, kOp, "gate_sigmoid");
  check_tensor(u, DType::kBF16, kOp, "u");
  check_tensor(gate_weight, DType::kF32, kOp, "gate_weight");
  check_tensor(table, DType::kF32, kOp, "table");
  check_tensor(ids, DType::kI32, kOp, "ids");
  const GateDims dims = gate_dims(v, gate_sigmoid, u, gate_weight, table, ids, kOp);
  if (dims.rows == 0) return;
  const int blocks = static_cast<int>((dims.rows + kTokensPerBlock - 1) / kTokensPerBlock);
  with_pack_of<kHeadPack>(heads_packable(dims, {v.data(), table.data}), [&](auto count) {
    launch_kernel<value_embed_gate_forward_kernel<decltype(count)::value>>(blocks, kThreadsPerBlock)(
        v.as<__nv_bfloat16>(), gate_sigmoid.as<float>(), u.as<__nv_bfloat16>(), gate_weight.as<float>(),
        table.as<float>(), ids.as<int32_t>(), dims);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void value_embed_gate_backward(TensorView d_u, TensorView d_gate_weight, TensorView d_table, HeadSlice d_v,
                               TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                               TensorView table, TensorView ids, const ops::KernelSettings& settings) {
  constexpr const char* kOp = "value_embed_gate_backward";
  check_tensor(d_u, DType::kBF16, kOp, "d_u");
  check_tensor(d_gate_weight, DType::kF32, kOp, "d_gate_weight");
  check_tensor(d_table, DType::kF32, kOp, "d_table");
  check_tensor(d_v.whole, DType::kBF16, kOp, "d_v");
  check_tensor(u, DType::kBF16, kOp, "u");
  check_tensor(gate_sigmoid, DType::kF32, kOp, "gate_sigmoid");
  check_tensor(gate_weight, DType::kF32, kOp, "gate_weight");
  check_tensor(table, DType::kF32, kOp, "table");
  check_tensor(ids, DType::kI32, kOp, "ids");
  const GateDims dims = gate_dims(d_v, gate_sigmoid, u, gate_weight, table, ids, kOp);
  check_same_shape(d_u, u, kOp);
  check_same_shape(d_gate_weight, gate_weight, kOp);
  check_same_shape(d_table, table, kOp);
  if (dims.rows == 0) return;

  const int blocks = blocks_for(dims.rows, kTokensPerBlock, kMaxBackwardBlocks);
  const int values = dims.kv_heads * dims.gate_channels;
  float* partials = static_cast<float*>(device_scratch(int64_t{blocks} * values * sizeof(float)));
  const bool in_token_order = settings.deterministic;
  const size_t shared_bytes = sizeof(float) * kTokensPerBlock * static_cast<size_t>(values);
  with_pack_of<kHeadPack>(heads_packable(dims, {d_v.data(), table.data}), [&](auto count) {
    launch_kernel<value_embed_gate_backward_kernel<decltype(count)::value>>(
        blocks, kThreadsPerBlock, shared_bytes)(d_u.as<__nv_bfloat16>(), partials, d_table.as<float>(),
                                                d_v.as<__nv_bfloat16>(), u.as<__nv_bfloat16>(),
                                                gate_sigmoid.as<float>(), gate_weight.as<float>(),
                                                table.as<float>(), ids.as<int32_t>(), dims, !in_token_order);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
  launch_kernel<fold_partials_kernel<AddTotal>>(values, kFinalSumThreads)(
      partials, blocks, values, AddTotal{d_gate_weight.as<float>()});
  NANOFORGE_CUDA_CHECK_LAUNCH("value_embed_gate_backward (gate weight sums)");
  if (in_token_order) {
    const int64_t column_groups = (int64_t{dims.kv_heads} * dims.head_dim + kWarpSize - 1) / kWarpSize;
    const int64_t warps = column_groups * kScatterResidues;
    launch_kernel<scatter_table_in_token_order_kernel>(
        static_cast<int>((warps + kTokensPerBlock - 1) / kTokensPerBlock), kThreadsPerBlock)(
        d_table.as<float>(), d_v.as<__nv_bfloat16>(), gate_sigmoid.as<float>(), ids.as<int32_t>(), dims);
    NANOFORGE_CUDA_CHECK_LAUNCH("value_embed_gate_backward (table scatter in token order)");
  }
}

}  // namespace nanoforge::cuda
