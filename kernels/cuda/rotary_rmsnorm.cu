// Rotary embedding with nanochat's QK-norm (RMSNorm of each head, times 1.2) in one pass on the GPU, the CUDA
// twin of kernels/cpu/rotary_rmsnorm.cpp: q or k (B, T, heads, D) bf16, in place (a head slice of the fused
// projection's output, positions row_elements apart), f32 cos / sin tables (T_max, D/2), halves not
// interleaved:
//   forward:  r = (x1 c + x2 s, -x1 s + x2 c);  x = bf16(scale * r * rstd), rstd over the fp32 r
//   backward: n = rstd (scale d - out mean(d out) / scale);  d = bf16(n1 c - n2 s, n1 s + n2 c)
// One warp per (position, head) row, two sweeps with fp32 in between (one bf16 rounding where the unfused
// sequence had two): docs/kernels.md, "Rotary with the QK-norm".
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // 256 threads, one warp per (position, head)
constexpr int kThreadsPerBlock = kRowsPerBlock * kWarpSize;

// The rotation of kCount pairs: sign = 1 forward, -1 the transpose.
template <int kCount>
__device__ inline void rotate(float (&first)[kCount], float (&second)[kCount], const float (&c)[kCount],
                              const float (&s)[kCount], float sign) {
#pragma unroll
  for (int k = 0; k < kCount; ++k) {
    const float x1 = first[k], x2 = second[k];
    first[k] = x1 * c[k] + sign * x2 * s[k];
    second[k] = -sign * x1 * s[k] + x2 * c[k];
  }
}

template <int kCount>
__device__ inline void to_floats(const Pack<__nv_bfloat16, kCount>& pack, float (&values)[kCount]) {
#pragma unroll
  for (int k = 0; k < kCount; ++k)
    values[k] = __bfloat162float(pack.values[k]);
}

// Where (position, head) row `row` of a slice starts: heads of a position are contiguous, positions
// row_elements apart.
__device__ inline int64_t head_offset(int64_t row, int heads, int half, int64_t row_elements) {
  return row / heads * row_elements + row % heads * 2 * half;
}

// x: (rows = B * T * heads, 2 * half) bf16, in place, positions row_elements apart; rstd (rows) f32; cos,
// sin: (>= seq, half) f32.
template <int kCount>
__global__ void rotary_rmsnorm_forward_kernel(__nv_bfloat16* x, float* rstd, const float* __restrict__ cos,
                                              const float* __restrict__ sin, int64_t rows, int seq, int heads,
                                              int half, int64_t row_elements, float scale, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int packs = half / kCount;
  const int64_t t = (row / heads) % seq;
  const float* cos_row = cos + t * half;
  const float* sin_row = sin + t * half;
  __nv_bfloat16* first_half = x + head_offset(row, heads, half, row_elements);
  __nv_bfloat16* second_half = first_half + half;

  float sum_squares = 0;
  for (int p = lane; p < packs; p += kWarpSize) {
    float x1[kCount], x2[kCount], c[kCount], s[kCount];
    to_floats<kCount>(pack_at<kCount>(first_half, p), x1);
    to_floats<kCount>(pack_at<kCount>(second_half, p), x2);
    load_floats<kCount>(cos_row, p, c);
    load_floats<kCount>(sin_row, p, s);
    rotate<kCount>(x1, x2, c, s, 1.0f);
#pragma unroll
    for (int k = 0; k < kCount; ++k)
      sum_squares += x1[k] * x1[k] + x2[k] * x2[k];
  }
  sum_squares = warp_sum(sum_squares);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(2 * half) + eps);
  if (lane == 0) rstd[row] = inv_rms;

  const float multiplier = inv_rms * scale;
  for (int p = lane; p < packs; p += kWarpSize) {
    float x1[kCount], x2[kCount], c[kCount], s[kCount];
    to_floats<kCount>(pack_at<kCount>(first_half, p), x1);
    to_floats<kCount>(pack_at<kCount>(second_half, p), x2);
    load_floats<kCount>(cos_row, p, c);
    load_floats<kCount>(sin_row, p, s);
    rotate<kCount>(x1, x2, c, s, 1.0f);
    Pack<__nv_bfloat16, kCount> out1, out2;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      out1.values[k] = __float2bfloat16_rn(x1[k] * multiplier);
      out2.values[k] = __float2bfloat16_rn(x2[k] * multiplier);
    }
    pack_at<kCount>(first_half, p) = out1;
    pack_at<kCount>(second_half, p) = out2;
  }
}

// d_x, out: (rows, 2 * half) bf16, positions d_x_row / out_row elements apart, d_x in place (out is the
// forward's output); rstd (rows) f32.
template <int kCount>
__global__ void rotary_rmsnorm_backward_kernel(__nv_bfloat16* d_x, const __nv_bfloat16* out,
                                               const float* rstd, const float* __restrict__ cos,
                                               const float* __restrict__ sin, int64_t rows, int seq,
                                               int heads, int half, int64_t d_x_row, int64_t out_row,
                                               float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int packs = half / kCount;
  const int64_t t = (row / heads) % seq;
  const float* cos_row = cos + t * half;
  const float* sin_row = sin + t * half;
  __nv_bfloat16* d_first = d_x + head_offset(row, heads, half, d_x_row);
  __nv_bfloat16* d_second = d_first + half;
  const __nv_bfloat16* y_first = out + head_offset(row, heads, half, out_row);
  const __nv_bfloat16* y_second = y_first + half;

  float dot = 0;
  for (int p = lane; p < packs; p += kWarpSize) {
    float g1[kCount], g2[kCount], y1[kCount], y2[kCount];
    to_floats<kCount>(pack_at<kCount>(d_first, p), g1);
    to_floats<kCount>(pack_at<kCount>(d_second, p), g2);
    to_floats<kCount>(pack_at<kCount>(y_first, p), y1);
    to_floats<kCount>(pack_at<kCount>(y_second, p), y2);
#pragma unroll
    for (int k = 0; k < kCount; ++k)
      dot += g1[k] * y1[k] + g2[k] * y2[k];
  }
  dot = warp_sum(dot);
  const float inv_rms = rstd[row];
  const float projection = dot / static_cast<float>(2 * half) / scale;
  const float grad_scale = inv_rms * scale;

  for (int p = lane; p < packs; p += kWarpSize) {
    float g1[kCount], g2[kCount], y1[kCount], y2[kCount], c[kCount], s[kCount];
    to_floats<kCount>(pack_at<kCount>(d_first, p), g1);
    to_floats<kCount>(pack_at<kCount>(d_second, p), g2);
    to_floats<kCount>(pack_at<kCount>(y_first, p), y1);
    to_floats<kCount>(pack_at<kCount>(y_second, p), y2);
    load_floats<kCount>(cos_row, p, c);
    load_floats<kCount>(sin_row, p, s);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      g1[k] = grad_scale * g1[k] - inv_rms * y1[k] * projection;
      g2[k] = grad_scale * g2[k] - inv_rms * y2[k] * projection;
    }
    rotate<kCount>(g1, g2, c, s, -1.0f);
    Pack<__nv_bfloat16, kCount> out1, out2;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      out1.values[k] = __float2bfloat16_rn(g1[k]);
      out2.values[k] = __float2bfloat16_rn(g2[k]);
    }
    pack_at<kCount>(d_first, p) = out1;
    pack_at<kCount>(d_second, p) = out2;
  }
}

// The checked shape of x (B, T, heads, D) against the tables and rstd.
struct HeadRows {
  int64_t rows;
  int seq, heads, half;
};

HeadRows check_shapes(const HeadSlice& x, const TensorView& rstd, const TensorView& cos,
                      const TensorView& sin, const char* op) {
  check_tensor(x.whole, DType::kBF16, op, "x");
  check_tensor(rstd, DType::kF32, op, "rstd");
  check_tensor(cos, DType::kF32, op, "cos");
  check_tensor(sin, DType::kF32, op, "sin");
  const int64_t batch = x.batch(), seq = x.seq(), heads = x.heads(), head_dim = x.head_dim();
  const int64_t half = head_dim / 2;
  NANOFORGE_CHECK(head_dim % 2 == 0, "{} on CUDA: head dim {} of x {} must be even", op, head_dim,
                  x.describe());
  NANOFORGE_CHECK(half > 0 && cos.dim(-1) == half && sin.dim(-1) == half && cos.numel() / half >= seq &&
                      sin.numel() == cos.numel(),
                  "{} on CUDA: tables {} / {} must be (>= {}, {})", op, cos.describe(), sin.describe(), seq,
                  half);
  const int64_t rows = batch * seq * heads;
  NANOFORGE_CHECK(rstd.numel() == rows, "{} on CUDA: rstd {} must hold one value per head of x {}", op,
                  rstd.describe(), x.describe());
  NANOFORGE_CHECK(seq <= std::numeric_limits<int>::max() && heads <= std::numeric_limits<int>::max() &&
                      head_dim <= std::numeric_limits<int>::max() &&
                      rows / kRowsPerBlock < std::numeric_limits<int>::max(),
                  "{} on CUDA: x {} is too large for the kernel's 32-bit indices", op, x.describe());
  return {rows, static_cast<int>(seq), static_cast<int>(heads), static_cast<int>(half)};
}

int row_blocks(int64_t rows) {
  return blocks_for(rows, kRowsPerBlock, std::numeric_limits<int>::max());
}

}  // namespace

void rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView sin, double scale) {
  constexpr const char* kOp = "rotary_rmsnorm_forward";
  const HeadRows shape = check_shapes(x, rstd, cos, sin, kOp);
  if (shape.rows == 0) return;
  // 16-byte packs of 8 pairs when each half of each head starts on a 16-byte boundary, and the cos / sin
  // packs too: aligned bases and half a multiple of 8.
  const bool packable = rows_packable<__nv_bfloat16>(shape.half, {x.data(), cos.data, sin.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<rotary_rmsnorm_forward_kernel<decltype(count)::value>>(
        row_blocks(shape.rows), kThreadsPerBlock)(x.as<__nv_bfloat16>(), rstd.as<float>(), cos.as<float>(),
                                                  sin.as<float>(), shape.rows, shape.seq, shape.heads,
                                                  shape.half, x.row_elements(), static_cast<float>(scale),
                                                  static_cast<float>(ops::kRmsNormEps));
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                             double scale) {
  constexpr const char* kOp = "rotary_rmsnorm_backward";
  const HeadRows shape = check_shapes(d_x, rstd, cos, sin, kOp);
  check_tensor(out.whole, DType::kBF16, kOp, "out");
  check_same_shape(out, d_x, kOp);
  if (shape.rows == 0) return;
  const bool packable =
      rows_packable<__nv_bfloat16>(shape.half, {d_x.data(), out.data(), cos.data, sin.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<rotary_rmsnorm_backward_kernel<decltype(count)::value>>(row_blocks(shape.rows),
                                                                          kThreadsPerBlock)(
        d_x.as<__nv_bfloat16>(), out.as<__nv_bfloat16>(), rstd.as<float>(), cos.as<float>(), sin.as<float>(),
        shape.rows, shape.seq, shape.heads, shape.half, d_x.row_elements(), out.row_elements(),
        static_cast<float>(scale));
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
