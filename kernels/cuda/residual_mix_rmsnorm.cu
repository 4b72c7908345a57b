// nanochat's per-layer residual mix with the RMSNorm that follows it, on the GPU: the CUDA twin of
// kernels/cpu/residual_mix_rmsnorm.cpp, one pass where the unfused sequence took two (forward) or two plus
// the mix's reduction (backward). One warp per row of C channels, as rmsnorm.cu. Forward: residual =
// bf16(a x + b x0) is written and its sum of squares taken in one sweep, the normalised row (and, for the
// FP8 GEMM that reads it, its amax: amax.cuh) in a second. Backward: g = bf16(d_residual + the norm's
// gradient) gives d_x, d_x0 and the lambda dot products, folded in a fixed order (reductions.cuh). The row
// loop strides over a grid capped by the shape alone (launch_shape.cuh). docs/kernels.md, "Residual mix".
#include <initializer_list>
#include <limits>
#include <utility>

#include "kernels/cuda/amax.cuh"
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
constexpr int64_t kMaxReduceBlocks = 1024;  // the backward's partials: about one wave on an H200
constexpr int kSumThreads = 256;            // the block that folds the partials

// residual, out, x, x0: (rows, width) bf16, row-major; x may be x0; rstd (rows) f32.
//   residual = bf16(a x + b x0);  rstd = 1 / sqrt(mean(residual^2) + eps);  out = residual * rstd
// amax_bits, unless null, is raised to max |out| (amax.cuh).
template <int kCount>
__global__ void residual_mix_rmsnorm_forward_kernel(__nv_bfloat16* residual, __nv_bfloat16* out, float* rstd,
                                                    const __nv_bfloat16* x, const __nv_bfloat16* x0,
                                                    const float* resid_lambda, const float* x0_lambda,
                                                    int64_t rows, int width, float eps, unsigned* amax_bits) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = threadIdx.x % kWarpSize;
  const int packs = width / kCount;
  const float a = *resid_lambda, b = *x0_lambda;
  const int64_t offset = row * width;

  float sum_squares = 0;
  for (int p = lane; p < packs; p += kWarpSize) {
    const Pack<__nv_bfloat16, kCount> in = pack_at<kCount>(x + offset, p);
    const Pack<__nv_bfloat16, kCount> in0 = pack_at<kCount>(x0 + offset, p);
    Pack<__nv_bfloat16, kCount> mixed;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      mixed.values[k] =
          __float2bfloat16_rn(a * __bfloat162float(in.values[k]) + b * __bfloat162float(in0.values[k]));
      const float value = __bfloat162float(mixed.values[k]);
      sum_squares += value * value;
    }
    pack_at<kCount>(residual + offset, p) = mixed;
  }
  sum_squares = warp_sum(sum_squares);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(width) + eps);
  if (lane == 0) rstd[row] = inv_rms;

  unsigned local_amax = 0;
  for (int p = lane; p < packs; p += kWarpSize) {
    const Pack<__nv_bfloat16, kCount> mixed = pack_at<kCount>(residual + offset, p);  // this lane's own write
    Pack<__nv_bfloat16, kCount> result;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      result.values[k] = __float2bfloat16_rn(__bfloat162float(mixed.values[k]) * inv_rms);
      local_amax = max(local_amax, abs_bits(__bfloat162float(result.values[k])));
    }
    pack_at<kCount>(out + offset, p) = result;
  }
  warp_raise_amax(amax_bits, local_amax);
}

// d_residual, d_x0, d_out, out, x, x0: (rows, width) bf16, row-major; rstd (rows) f32; partials (gridDim.x,
// 2) f32: this block's sums of g x and g x0. Per row, with g = bf16(d_residual + rstd (d_out - out
// mean(d_out out))):  d_residual = bf16(a g);  d_x0 = bf16(d_x0 + b g).
template <int kCount>
__global__ void residual_mix_rmsnorm_backward_kernel(__nv_bfloat16* d_residual, __nv_bfloat16* d_x0,
                                                     float* partials, const __nv_bfloat16* d_out,
                                                     const __nv_bfloat16* out, const float* rstd,
                                                     const __nv_bfloat16* x, const __nv_bfloat16* x0,
                                                     const float* resid_lambda, const float* x0_lambda,
                                                     int64_t rows, int width) {
  __shared__ float shared[kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int packs = width / kCount;
  const float a = *resid_lambda, b = *x0_lambda;
  float dot_x = 0, dot_x0 = 0;
  // The row condition is the same for a whole warp, so the shuffles inside stay full-warp, and every thread
  // reaches the block sums below.
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t offset = row * width;
    float dot = 0;
    for (int p = lane; p < packs; p += kWarpSize) {
      const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(d_out + offset, p);
      const Pack<__nv_bfloat16, kCount> y = pack_at<kCount>(out + offset, p);
#pragma unroll
      for (int k = 0; k < kCount; ++k)
        dot += __bfloat162float(grad.values[k]) * __bfloat162float(y.values[k]);
    }
    dot = warp_sum(dot);
    const float inv_rms = rstd[row];
    const float projection = dot / static_cast<float>(width);

    for (int p = lane; p < packs; p += kWarpSize) {
      const Pack<__nv_bfloat16, kCount> grad = pack_at<kCount>(d_out + offset, p);
      const Pack<__nv_bfloat16, kCount> y = pack_at<kCount>(out + offset, p);
      const Pack<__nv_bfloat16, kCount> in = pack_at<kCount>(x + offset, p);
      const Pack<__nv_bfloat16, kCount> in0 = pack_at<kCount>(x0 + offset, p);
      Pack<__nv_bfloat16, kCount> residual_grad = pack_at<kCount>(d_residual + offset, p);
      Pack<__nv_bfloat16, kCount> grad_x0 = pack_at<kCount>(d_x0 + offset, p);
#pragma unroll
      for (int k = 0; k < kCount; ++k) {
        const float norm_grad =
            inv_rms * __bfloat162float(grad.values[k]) - inv_rms * __bfloat162float(y.values[k]) * projection;
        const float g =
            __bfloat162float(__float2bfloat16_rn(norm_grad + __bfloat162float(residual_grad.values[k])));
        dot_x += g * __bfloat162float(in.values[k]);
        dot_x0 += g * __bfloat162float(in0.values[k]);
        grad_x0.values[k] = __float2bfloat16_rn(__bfloat162float(grad_x0.values[k]) + b * g);
        residual_grad.values[k] = __float2bfloat16_rn(a * g);
      }
      pack_at<kCount>(d_x0 + offset, p) = grad_x0;
      pack_at<kCount>(d_residual + offset, p) = residual_grad;
    }
  }
  dot_x = block_sum(dot_x, shared);
  dot_x0 = block_sum(dot_x0, shared);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = dot_x;
    partials[2 * blockIdx.x + 1] = dot_x0;
  }
}

// finish for fold_partials_kernel over the two columns of the backward's partials: column 0 is added to
// d_resid_lambda, column 1 to d_x0_lambda (each total rounded to f32 once, as the CPU adds its fp64 sums).
struct AddToLambdaGradients {
  float* d_resid_lambda;
  float* d_x0_lambda;
  __device__ void operator()(int column, double total) const {
    float* into = column == 0 ? d_resid_lambda : d_x0_lambda;
    *into += static_cast<float>(total);
  }
};

void check_scalar(const TensorView& t, const char* op, const char* name) {
  check_tensor(t, DType::kF32, op, name);
  NANOFORGE_CHECK(t.numel() == 1, "{} on CUDA: {} must have one element, got {}", op, name, t.describe());
}

// The rows and width of the (..., C) activations, checked: every tensor bf16 and of x's shape, rstd f32 with
// one value per row.
struct RowShape {
  int64_t rows;
  int width;
};

RowShape check_rows(std::initializer_list<std::pair<const TensorView*, const char*>> activations,
                    const TensorView& x, const TensorView& rstd, const char* op) {
  for (const auto& [t, name] : activations) {
    check_tensor(*t, DType::kBF16, op, name);
    check_same_shape(*t, x, op);
  }
  check_tensor(rstd, DType::kF32, op, "rstd");
  const int64_t width = x.dim(-1);
  NANOFORGE_CHECK(width > 0 && width <= std::numeric_limits<int>::max(),
                  "{} on CUDA: the last dimension of {} must be in [1, 2^31)", op, x.describe());
  const int64_t rows = x.numel() / width;
  NANOFORGE_CHECK(rows / kRowsPerBlock < std::numeric_limits<int>::max(),
                  "{} on CUDA: {} has too many rows for one launch", op, x.describe());
  NANOFORGE_CHECK(rstd.numel() == rows, "{} on CUDA: rstd {} must hold one value per row of {}", op,
                  rstd.describe(), x.describe());
  return {rows, static_cast<int>(width)};
}

}  // namespace

void residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                  TensorView x0, TensorView resid_lambda, TensorView x0_lambda,
                                  ops::AmaxOutput amax) {
  constexpr const char* kOp = "residual_mix_rmsnorm_forward";
  const RowShape shape =
      check_rows({{&residual, "residual"}, {&out, "out"}, {&x, "x"}, {&x0, "x0"}}, x, rstd, kOp);
  check_scalar(resid_lambda, kOp, "resid_lambda");
  check_scalar(x0_lambda, kOp, "x0_lambda");
  unsigned* amax_bits = amax_word(amax, kOp);  // zeroed: the max of nothing is 0
  if (shape.rows == 0) return;
  const bool packable = rows_packable<__nv_bfloat16>(shape.width, {residual.data, out.data, x.data, x0.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<residual_mix_rmsnorm_forward_kernel<decltype(count)::value>>(
        blocks_for(shape.rows, kRowsPerBlock, std::numeric_limits<int>::max()), kThreadsPerBlock)(
        residual.as<__nv_bfloat16>(), out.as<__nv_bfloat16>(), rstd.as<float>(), x.as<__nv_bfloat16>(),
        x0.as<__nv_bfloat16>(), resid_lambda.as<float>(), x0_lambda.as<float>(), shape.rows, shape.width,
        static_cast<float>(ops::kRmsNormEps), amax_bits);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView d_resid_lambda,
                                   TensorView d_x0_lambda, TensorView d_out, TensorView out, TensorView rstd,
                                   TensorView x, TensorView x0, TensorView resid_lambda,
                                   TensorView x0_lambda) {
  constexpr const char* kOp = "residual_mix_rmsnorm_backward";
  const RowShape shape = check_rows({{&d_residual, "d_residual"},
                                     {&d_x0, "d_x0"},
                                     {&d_out, "d_out"},
                                     {&out, "out"},
                                     {&x, "x"},
                                     {&x0, "x0"}},
                                    x, rstd, kOp);
  check_scalar(d_resid_lambda, kOp, "d_resid_lambda");
  check_scalar(d_x0_lambda, kOp, "d_x0_lambda");
  check_scalar(resid_lambda, kOp, "resid_lambda");
  check_scalar(x0_lambda, kOp, "x0_lambda");
  if (shape.rows == 0) return;  // the lambda gradients gain an empty sum
  const bool packable = rows_packable<__nv_bfloat16>(
      shape.width, {d_residual.data, d_x0.data, d_out.data, out.data, x.data, x0.data});
  const int blocks = blocks_for(shape.rows, kRowsPerBlock, kMaxReduceBlocks);
  auto* partials = static_cast<float*>(device_scratch(2 * blocks * static_cast<int64_t>(sizeof(float))));
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<residual_mix_rmsnorm_backward_kernel<decltype(count)::value>>(blocks, kThreadsPerBlock)(
        d_residual.as<__nv_bfloat16>(), d_x0.as<__nv_bfloat16>(), partials, d_out.as<__nv_bfloat16>(),
        out.as<__nv_bfloat16>(), rstd.as<float>(), x.as<__nv_bfloat16>(), x0.as<__nv_bfloat16>(),
        resid_lambda.as<float>(), x0_lambda.as<float>(), shape.rows, shape.width);
  });
  launch_kernel<fold_partials_kernel<AddToLambdaGradients>>(2, kSumThreads)(
      partials, blocks, /*values=*/2,
      AddToLambdaGradients{d_resid_lambda.as<float>(), d_x0_lambda.as<float>()});
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
