// RMSNorm without a learned weight on the GPU (nanochat's norm, and with scale 1.2 its QK-norm), the CUDA
// twin of kernels/cpu/rmsnorm.cpp: same math, bf16 activations, fp32 statistics and accumulation.
// One warp per row: rows are short (C = 1280 channels, or a 128-wide head for QK-norm), so a warp covers one
// with a few 16-byte loads per lane and reduces it with shuffles, no shared memory and no block barrier. Each
// kernel reads its row twice (reduce, then write); the second pass hits L1/L2, as the row was just read. The
// forward can take the max of what it writes, the amax of the FP8 GEMM that reads it (amax.cuh).
#include <limits>

#include "kernels/cuda/amax.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // 256 threads: a block size every architecture schedules well
constexpr int kThreadsPerBlock = kRowsPerBlock * kWarpSize;

// x, out: (rows, width) bf16, row-major, out may alias x; rstd: (rows) f32. Each row is width / kCount packs;
// lane l handles packs l, l + 32, ...
//   rstd = 1 / sqrt(mean(x^2) + eps);  out = x * (rstd * scale)
// amax_bits, unless null, is raised to max |out| (amax.cuh).
template <int kCount>
__global__ void rmsnorm_forward_kernel(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* x, int64_t rows,
                                       int width, float scale, float eps, unsigned* amax_bits) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int packs = width / kCount;
  const __nv_bfloat16* x_row = x + row * width;
  __nv_bfloat16* out_row = out + row * width;

  float sum_squares = 0;
  for (int p = lane; p < packs; p += kWarpSize) {
    const Pack<__nv_bfloat16, kCount> in = pack_at<kCount>(x_row, p);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float value = __bfloat162float(in.values[k]);
      sum_squares += value * value;
    }
  }
  sum_squares = warp_sum(sum_squares);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(width) + eps);
  if (lane == 0) rstd[row] = inv_rms;

  const float multiplier = inv_rms * scale;
  unsigned local_amax = 0;
  for (int p = lane; p < packs; p += kWarpSize) {
    const Pack<__nv_bfloat16, kCount> in = pack_at<kCount>(x_row, p);
    Pack<__nv_bfloat16, kCount> result;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      result.values[k] = __float2bfloat16_rn(__bfloat162float(in.values[k]) * multiplier);
      local_amax = max(local_amax, abs_bits(__bfloat162float(result.values[k])));
    }
    pack_at<kCount>(out_row, p) = result;
  }
  warp_raise_amax(amax_bits, local_amax);
}

// d_x, d_out, out: (rows, width) bf16, row-major; rstd: (rows) f32. d_x may alias d_out: a lane writes only
// the packs it read itself, after the whole warp's reads (the shuffles order them).
//   d_x (+)= rstd * scale * d_out - rstd * out * mean(d_out * out) / scale
template <int kCount>
__global__ void rmsnorm_backward_kernel(__nv_bfloat16* d_x, const __nv_bfloat16* d_out,
                                        const __nv_bfloat16* out, const float* rstd, int64_t rows, int width,
                                        float scale, bool accumulate) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int packs = width / kCount;
  const __nv_bfloat16* d_out_row = d_out + row * width;
  const __nv_bfloat16* out_row = out + row * width;
  __nv_bfloat16* d_x_row = d_x + row * width;

  float dot = 0;
  for (int p = lane; p < packs; p += kWarpSize) {
    const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(d_out_row, p);
    const Pack<__nv_bfloat16, kCount> y = pack_at<kCount>(out_row, p);
#pragma unroll
    for (int k = 0; k < kCount; ++k)
      dot += __bfloat162float(grad.values[k]) * __bfloat162float(y.values[k]);
  }
  dot = warp_sum(dot);
  const float inv_rms = rstd[row];
  const float projection = dot / static_cast<float>(width) / scale;
  const float grad_scale = inv_rms * scale;

  for (int p = lane; p < packs; p += kWarpSize) {
    const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(d_out_row, p);
    const Pack<__nv_bfloat16, kCount> y = pack_at<kCount>(out_row, p);
    Pack<__nv_bfloat16, kCount> result;
    if (accumulate) result = pack_at<kCount>(d_x_row, p);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      float value = grad_scale * __bfloat162float(grad.values[k]) -
                    inv_rms * __bfloat162float(y.values[k]) * projection;
      if (accumulate) value += __bfloat162float(result.values[k]);
      result.values[k] = __float2bfloat16_rn(value);
    }
    pack_at<kCount>(d_x_row, p) = result;
  }
}

// The rows and width of an (..., width) activation, checked to fit the kernels' index types.
struct RowShape {
  int64_t rows;
  int width;
};

RowShape row_shape(const TensorView& t, const char* op) {
  const int64_t width = t.dim(-1);
  NANOFORGE_CHECK(width > 0 && width <= std::numeric_limits<int>::max(),
                  "{} on CUDA: the last dimension of {} must be in [1, 2^31)", op, t.describe());
  const int64_t rows = t.numel() / width;
  NANOFORGE_CHECK((rows + kRowsPerBlock - 1) / kRowsPerBlock <= std::numeric_limits<int>::max(),
                  "{} on CUDA: {} has too many rows for one launch", op, t.describe());
  return {rows, static_cast<int>(width)};
}

int row_blocks(int64_t rows) {
  return static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale, ops::AmaxOutput amax) {
  constexpr const char* kOp = "rmsnorm_forward";
  check_tensor(x, DType::kBF16, kOp, "x");
  check_tensor(out, DType::kBF16, kOp, "out");
  check_tensor(rstd, DType::kF32, kOp, "rstd");
  check_same_shape(out, x, kOp);
  const RowShape shape = row_shape(x, kOp);
  NANOFORGE_CHECK(rstd.numel() == shape.rows, "{} on CUDA: rstd {} must hold one value per row of x {}", kOp,
                  rstd.describe(), x.describe());
  unsigned* amax_bits = amax_word(amax, kOp);  // zeroed: the max of nothing is 0
  if (shape.rows == 0) return;
  const bool packable = rows_packable<__nv_bfloat16>(shape.width, {out.data, x.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<rmsnorm_forward_kernel<decltype(count)::value>>(row_blocks(shape.rows), kThreadsPerBlock)(
        out.as<__nv_bfloat16>(), rstd.as<float>(), x.as<__nv_bfloat16>(), shape.rows, shape.width,
        static_cast<float>(scale), static_cast<float>(ops::kRmsNormEps), amax_bits);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                      ops::Accumulate mode) {
  constexpr const char* kOp = "rmsnorm_backward";
  check_tensor(d_x, DType::kBF16, kOp, "d_x");
  check_tensor(d_out, DType::kBF16, kOp, "d_out");
  check_tensor(out, DType::kBF16, kOp, "out");
  check_tensor(rstd, DType::kF32, kOp, "rstd");
  check_same_shape(d_out, out, kOp);
  check_same_shape(d_x, out, kOp);
  const RowShape shape = row_shape(out, kOp);
  NANOFORGE_CHECK(rstd.numel() == shape.rows, "{} on CUDA: rstd {} must hold one value per row of out {}",
                  kOp, rstd.describe(), out.describe());
  if (shape.rows == 0) return;
  with_pack_count<__nv_bfloat16>(
      rows_packable<__nv_bfloat16>(shape.width, {d_x.data, d_out.data, out.data}), [&](auto count) {
        launch_kernel<rmsnorm_backward_kernel<decltype(count)::value>>(row_blocks(shape.rows),
                                                                       kThreadsPerBlock)(
            d_x.as<__nv_bfloat16>(), d_out.as<__nv_bfloat16>(), out.as<__nv_bfloat16>(), rstd.as<float>(),
            shape.rows, shape.width, static_cast<float>(scale), mode == ops::Accumulate::kYes);
      });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
