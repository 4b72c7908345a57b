// nanochat's smear on the GPU, the CUDA twin of kernels/cpu/smear.cpp: same math, bf16 x/out/d_x/d_out, fp32
// gate sigmoids, parameters and their gradients. One warp per token row (C = 1280 channels: a few 16-byte
// packs per lane), as rmsnorm.cu. The backward's gate-weight and lambda gradients reduce over every token
// without atomics: each warp keeps its rows' sums in registers, each block writes the sum of its warps to
// device scratch, and a second kernel adds the block partials in block order, so the result has the same bits
// on every run. The grid is capped at a fixed block count that depends only on the row count, not the GPU.
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

constexpr int kRowsPerBlock = 8;  // 256 threads, one warp per row
constexpr int kThreadsPerBlock = kRowsPerBlock * kWarpSize;
// The backward's grid: at most this many blocks (about 8 resident per SM on a 132-SM H200), looping over rows
// beyond that; it bounds the partials the final sum reads.
constexpr int64_t kMaxBackwardBlocks = 1024;
constexpr int kFinalSumThreads = 256;

__device__ inline float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// x, out: (batch * seq, channels) bf16; gate_sigmoid: (batch * seq) f32; gate_weight: (gate_channels) f32;
// lambda: (1) f32. Row r is token t = r % seq of its sequence.
//   t = 0: out = x, gate_sigmoid = 0 (unused)
//   t > 0: s = sigmoid(x[r, :G] . gate_weight); out = x[r] + lambda * s * x[r - 1]
template <int kCount>
__global__ void smear_forward_kernel(__nv_bfloat16* out, float* gate_sigmoid, const __nv_bfloat16* x,
                                     const float* gate_weight, const float* lambda, int64_t rows, int64_t seq,
                                     int channels, int gate_channels) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int packs = channels / kCount;
  const bool first_token = row % seq == 0;
  const __nv_bfloat16* x_row = x + row * channels;
  __nv_bfloat16* out_row = out + row * channels;

  float pre = 0;
  if (!first_token) {
    for (int j = lane; j < gate_channels; j += kWarpSize)
      pre += __bfloat162float(x_row[j]) * gate_weight[j];
  }
  pre = warp_sum(pre);
  const float gate_value = first_token ? 0.0f : sigmoid(pre);
  if (lane == 0) gate_sigmoid[row] = gate_value;
  const float gate = *lambda * gate_value;

  for (int p = lane; p < packs; p += kWarpSize) {
    const Pack<__nv_bfloat16, kCount> in = pack_at<kCount>(x_row, p);
    Pack<__nv_bfloat16, kCount> result = in;
    if (!first_token) {
      const Pack<__nv_bfloat16, kCount> previous = pack_at<kCount>(x_row - channels, p);
#pragma unroll
      for (int k = 0; k < kCount; ++k) {
        result.values[k] =
            __float2bfloat16_rn(__bfloat162float(in.values[k]) + gate * __bfloat162float(previous.values[k]));
      }
    }
    pack_at<kCount>(out_row, p) = result;
  }
}

// d_x, d_out, x: (batch * seq, channels) bf16, d_x not aliasing d_out; gate_sigmoid: (batch * seq) f32;
// gate_weight: (G) f32, G = gate_channels < 32; lambda: (1) f32. partials: (gridDim.x, G + 1) f32, this
// block's sums of the gate-weight gradients (columns 0 .. G-1) and of lambda's (column G).
//   d_x[r] = d_out[r] + lambda * s[r + 1] * d_out[r + 1]    (the second term while t + 1 < seq)
//   for t > 0, with d_gate = d_out[r] . x[r - 1] and d_pre = d_gate * lambda * s (1 - s):
//     d_x[r, :G] += d_pre * gate_weight;  d_gate_weight += d_pre * x[r, :G];  d_lambda += d_gate * s
// Warp w of block b takes rows b * 8 + w, then every gridDim.x * 8 rows further; lane j < G keeps the sum for
// gate channel j and lane G that for lambda.
template <int kCount>
__global__ void smear_backward_kernel(__nv_bfloat16* d_x, float* partials, const __nv_bfloat16* d_out,
                                      const __nv_bfloat16* x, const float* gate_sigmoid,
                                      const float* gate_weight, const float* lambda, int64_t rows,
                                      int64_t seq, int channels, int gate_channels) {
  __shared__ float warp_partials[kRowsPerBlock][kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int packs = channels / kCount;
  const float lam = *lambda;
  float partial = 0;  // lane j < G: d_gate_weight[j]; lane G: d_lambda

  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t t = row % seq;
    const bool has_next = t + 1 < seq;
    const __nv_bfloat16* d_out_row = d_out + row * channels;
    const __nv_bfloat16* x_row = x + row * channels;
    __nv_bfloat16* d_x_row = d_x + row * channels;

    // The gate's gradient d_out[r] . x[r - 1], reduced over the warp (0 for a first token: no gate).
    float d_gate = 0;
    if (t > 0) {
      for (int p = lane; p < packs; p += kWarpSize) {
        const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(d_out_row, p);
        const Pack<__nv_bfloat16, kCount> previous = pack_at<kCount>(x_row - channels, p);
#pragma unroll
        for (int k = 0; k < kCount; ++k)
          d_gate += __bfloat162float(grad.values[k]) * __bfloat162float(previous.values[k]);
      }
    }
    d_gate = warp_sum(d_gate);
    float d_pre = 0;
    if (t > 0) {
      const float s = gate_sigmoid[row];
      d_pre = d_gate * lam * s * (1.0f - s);
      if (lane < gate_channels) partial += d_pre * __bfloat162float(x_row[lane]);
      if (lane == gate_channels) partial += d_gate * s;
    }

    const float next_gate = has_next ? lam * gate_sigmoid[row + 1] : 0.0f;
    for (int p = lane; p < packs; p += kWarpSize) {
      const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(d_out_row, p);
      Pack<__nv_bfloat16, kCount> next{};
      if (has_next) next = pack_at<kCount>(d_out_row + channels, p);
      Pack<__nv_bfloat16, kCount> result;
#pragma unroll
      for (int k = 0; k < kCount; ++k) {
        float value = __bfloat162float(grad.values[k]);
        if (has_next) value += next_gate * __bfloat162float(next.values[k]);
        const int channel = p * kCount + k;
        if (channel < gate_channels) value += d_pre * gate_weight[channel];
        result.values[k] = __float2bfloat16_rn(value);
      }
      pack_at<kCount>(d_x_row, p) = result;
    }
  }

  warp_partials[warp][lane] = partial;
  __syncthreads();
  if (static_cast<int>(threadIdx.x) <= gate_channels) {
    float block_total = 0;
    for (int w = 0; w < kRowsPerBlock; ++w)
      block_total += warp_partials[w][threadIdx.x];
    partials[static_cast<int64_t>(blockIdx.x) * (gate_channels + 1) + threadIdx.x] = block_total;
  }
}

// The smear's dimensions, checked against every tensor of the call.
struct SmearShape {
  int64_t rows, seq;
  int channels, gate_channels;
};

SmearShape smear_shape(const TensorView& x, const TensorView& gate_sigmoid, const TensorView& gate_weight,
                       const TensorView& lambda, const char* op) {
  check_rank(x, 3, op, "x");
  const int64_t channels = x.shape[2], gate_channels = gate_weight.numel();
  NANOFORGE_CHECK(channels > 0 && channels <= std::numeric_limits<int>::max(),
                  "{} on CUDA: the channels of x {} must be in [1, 2^31)", op, x.describe());
  // The backward keeps the gate-weight sums in lanes 0 .. G-1 and lambda's in lane G.
  NANOFORGE_CHECK(gate_channels >= 1 && gate_channels < kWarpSize && gate_channels <= channels,
                  "{} on CUDA: gate_weight {} must have 1 to {} elements and at most the channels of x {}",
                  op, gate_weight.describe(), kWarpSize - 1, x.describe());
  NANOFORGE_CHECK(lambda.numel() == 1, "{} on CUDA: lambda must have one element, got {}", op,
                  lambda.describe());
  const int64_t rows = x.shape[0] * x.shape[1];
  NANOFORGE_CHECK(gate_sigmoid.numel() == rows, "{} on CUDA: gate_sigmoid {} must be ({}, {})", op,
                  gate_sigmoid.describe(), x.shape[0], x.shape[1]);
  NANOFORGE_CHECK((rows + kRowsPerBlock - 1) / kRowsPerBlock <= std::numeric_limits<int>::max(),
                  "{} on CUDA: x {} has too many rows for one launch", op, x.describe());
  return {rows, x.shape[1], static_cast<int>(channels), static_cast<int>(gate_channels)};
}

}  // namespace

void smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView gate_weight,
                   TensorView lambda) {
  constexpr const char* kOp = "smear_forward";
  check_tensor(out, DType::kBF16, kOp, "out");
  check_tensor(gate_sigmoid, DType::kF32, kOp, "gate_sigmoid");
  check_tensor(x, DType::kBF16, kOp, "x");
  check_tensor(gate_weight, DType::kF32, kOp, "gate_weight");
  check_tensor(lambda, DType::kF32, kOp, "lambda");
  check_same_shape(out, x, kOp);
  NANOFORGE_CHECK(out.data != x.data, "{} on CUDA: out must not alias x (row t reads x[t - 1])", kOp);
  const SmearShape s = smear_shape(x, gate_sigmoid, gate_weight, lambda, kOp);
  if (s.rows == 0) return;
  const int blocks = static_cast<int>((s.rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const bool packable = rows_packable<__nv_bfloat16>(s.channels, {out.data, x.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<smear_forward_kernel<decltype(count)::value>>(blocks, kThreadsPerBlock)(
        out.as<__nv_bfloat16>(), gate_sigmoid.as<float>(), x.as<__nv_bfloat16>(), gate_weight.as<float>(),
        lambda.as<float>(), s.rows, s.seq, s.channels, s.gate_channels);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void smear_backward(TensorView d_x, TensorView d_gate_weight, TensorView d_lambda, TensorView d_out,
                    TensorView x, TensorView gate_sigmoid, TensorView gate_weight, TensorView lambda) {
  constexpr const char* kOp = "smear_backward";
  check_tensor(d_x, DType::kBF16, kOp, "d_x");
  check_tensor(d_gate_weight, DType::kF32, kOp, "d_gate_weight");
  check_tensor(d_lambda, DType::kF32, kOp, "d_lambda");
  check_tensor(d_out, DType::kBF16, kOp, "d_out");
  check_tensor(x, DType::kBF16, kOp, "x");
  check_tensor(gate_sigmoid, DType::kF32, kOp, "gate_sigmoid");
  check_tensor(gate_weight, DType::kF32, kOp, "gate_weight");
  check_tensor(lambda, DType::kF32, kOp, "lambda");
  check_same_shape(d_x, x, kOp);
  check_same_shape(d_out, x, kOp);
  NANOFORGE_CHECK(d_x.data != d_out.data && d_x.data != x.data,
                  "{} on CUDA: d_x must not alias d_out or x (row t reads d_out[t + 1] and x[t - 1])", kOp);
  const SmearShape s = smear_shape(x, gate_sigmoid, gate_weight, lambda, kOp);
  NANOFORGE_CHECK(d_gate_weight.numel() == s.gate_channels && d_lambda.numel() == 1,
                  "{} on CUDA: d_gate_weight {} and d_lambda {} must match gate_weight {} and lambda {}", kOp,
                  d_gate_weight.describe(), d_lambda.describe(), gate_weight.describe(), lambda.describe());
  if (s.rows == 0) return;
  const int blocks = blocks_for(s.rows, kRowsPerBlock, kMaxBackwardBlocks);
  const int values = s.gate_channels + 1;
  float* partials = static_cast<float*>(device_scratch(int64_t{blocks} * values * sizeof(float)));
  const bool packable = rows_packable<__nv_bfloat16>(s.channels, {d_x.data, d_out.data, x.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<smear_backward_kernel<decltype(count)::value>>(blocks, kThreadsPerBlock)(
        d_x.as<__nv_bfloat16>(), partials, d_out.as<__nv_bfloat16>(), x.as<__nv_bfloat16>(),
        gate_sigmoid.as<float>(), gate_weight.as<float>(), lambda.as<float>(), s.rows, s.seq, s.channels,
        s.gate_channels);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
  launch_kernel<fold_partials_kernel<AddTotal>>(s.gate_channels, kFinalSumThreads)(
      partials, blocks, values, AddTotal{d_gate_weight.as<float>()});
  NANOFORGE_CUDA_CHECK_LAUNCH("smear_backward (gate weight sums)");
  launch_kernel<fold_partials_kernel<AddTotal>>(1, kFinalSumThreads)(partials + s.gate_channels, blocks,
                                                                     values, AddTotal{d_lambda.as<float>()});
  NANOFORGE_CUDA_CHECK_LAUNCH("smear_backward (lambda sum)");
}

}  // namespace nanoforge::cuda
