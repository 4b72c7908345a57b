// Rotary position embedding on the GPU in nanochat's convention, the CUDA twin of kernels/cpu/rotary.cpp: x
// (B, T, heads, D) bf16 rotated in place by f32 cos / sin tables (T_max, D/2), halves not interleaved,
//   forward:  (x1, x2) -> (x1 c + x2 s, -x1 s + x2 c);   backward: the transpose, (x1 c - x2 s, x1 s + x2 c)
// in fp32 with one rounding to bf16. One warp per position (b, t): the position's cos / sin row is shared by
// all its heads, so it is read once per warp from L1. A lane rotates 8 pairs at a time (16-byte loads of x1
// and x2, and of cos / sin) when the head dim allows it, one pair at a time otherwise.
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int kPositionsPerBlock = 8;  // 256 threads
constexpr int kThreadsPerBlock = kPositionsPerBlock * kWarpSize;

// x: (positions = B * T, heads, 2 * half) bf16, in place; cos, sin: (>= seq, half) f32, row t for position t
// of each sequence. sign = 1 rotates forward, -1 backward. Lane l handles packs l, l + 32, ... of the
// position's heads * half / kCount pair packs: pack p is pairs [i, i + kCount) of head p / (half / kCount).
template <int kCount>
__global__ void rotary_kernel(__nv_bfloat16* x, const float* __restrict__ cos, const float* __restrict__ sin,
                              int64_t positions, int seq, int heads, int half, float sign) {
  const int lane = threadIdx.x % kWarpSize;
  const int packs_per_half = half / kCount;
  const int packs = heads * packs_per_half;
  for (int64_t position = static_cast<int64_t>(blockIdx.x) * kPositionsPerBlock + threadIdx.x / kWarpSize;
       position < positions; position += static_cast<int64_t>(gridDim.x) * kPositionsPerBlock) {
    const int64_t t = position % seq;
    const float* cos_row = cos + t * half;
    const float* sin_row = sin + t * half;
    __nv_bfloat16* x_position = x + position * heads * 2 * half;
    for (int p = lane; p < packs; p += kWarpSize) {
      const int head = p / packs_per_half;
      const int pair_pack = p % packs_per_half;
      __nv_bfloat16* first_half = x_position + static_cast<int64_t>(head) * 2 * half;
      __nv_bfloat16* second_half = first_half + half;
      const Pack<__nv_bfloat16, kCount> in1 = pack_at<kCount>(first_half, pair_pack);
      const Pack<__nv_bfloat16, kCount> in2 = pack_at<kCount>(second_half, pair_pack);
      float c[kCount], s[kCount];
      load_floats<kCount>(cos_row, pair_pack, c);
      load_floats<kCount>(sin_row, pair_pack, s);
      Pack<__nv_bfloat16, kCount> out1, out2;
#pragma unroll
      for (int k = 0; k < kCount; ++k) {
        const float first = __bfloat162float(in1.values[k]);
        const float second = __bfloat162float(in2.values[k]);
        out1.values[k] = __float2bfloat16_rn(first * c[k] + sign * second * s[k]);
        out2.values[k] = __float2bfloat16_rn(-sign * first * s[k] + second * c[k]);
      }
      pack_at<kCount>(first_half, pair_pack) = out1;
      pack_at<kCount>(second_half, pair_pack) = out2;
    }
  }
}

void rotate(TensorView x, TensorView cos, TensorView sin, float sign, const char* op) {
  check_tensor(x, DType::kBF16, op, "x");
  check_tensor(cos, DType::kF32, op, "cos");
  check_tensor(sin, DType::kF32, op, "sin");
  check_rank(x, 4, op, "x");
  const int64_t batch = x.shape[0], seq = x.shape[1], heads = x.shape[2], head_dim = x.shape[3];
  const int64_t half = head_dim / 2;
  NANOFORGE_CHECK(head_dim % 2 == 0, "{} on CUDA: head dim {} of x {} must be even", op, head_dim,
                  x.describe());
  NANOFORGE_CHECK(half > 0 && cos.dim(-1) == half && sin.dim(-1) == half && cos.numel() / half >= seq &&
                      sin.numel() == cos.numel(),
                  "{} on CUDA: tables {} / {} must be (>= {}, {})", op, cos.describe(), sin.describe(), seq,
                  half);
  NANOFORGE_CHECK(
      seq <= std::numeric_limits<int>::max() && heads * head_dim <= std::numeric_limits<int>::max(),
      "{} on CUDA: x {} is too large for the kernel's 32-bit position and head indices", op, x.describe());
  const int64_t positions = batch * seq;
  if (positions == 0 || heads == 0) return;
  // 16-byte packs of 8 pairs when each half of each head starts on a 16-byte boundary, and the cos / sin
  // packs too: aligned bases and half a multiple of 8.
  const bool packable = rows_packable<__nv_bfloat16>(half, {x.data, cos.data, sin.data});
  const int blocks = blocks_for(positions, kPositionsPerBlock);
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<rotary_kernel<decltype(count)::value>>(blocks, kThreadsPerBlock)(
        x.as<__nv_bfloat16>(), cos.as<float>(), sin.as<float>(), positions, static_cast<int>(seq),
        static_cast<int>(heads), static_cast<int>(half), sign);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(op);
}

}  // namespace

void rotary_forward(TensorView x, TensorView cos, TensorView sin) {
  rotate(x, cos, sin, 1.0f, "rotary_forward");
}

void rotary_backward(TensorView d_x, TensorView cos, TensorView sin) {
  rotate(d_x, cos, sin, -1.0f, "rotary_backward");
}

}  // namespace nanoforge::cuda
