// nanochat's backout on the GPU, the CUDA twin of kernels/cpu/backout.cpp: out = x - lambda * x_backout
// before the final norm (the per-layer residual mix is fused with its norm: residual_mix_rmsnorm.cu). bf16
// activations and gradients; lambda and its gradient are 1-element f32 views, read and written on the device
// only. Memory-bound grid-stride loops over 16-byte packs (for_each_pack); each thread reads all inputs of
// its elements before writing them, so out may alias x. lambda's gradient is summed in a fixed order (fp32
// per thread, per-block partials, one block folding them in double: fold_partials_kernel), so it is the
// same bits on every run; why those precisions: docs/kernels.md, "Backout".
#include <initializer_list>
#include <utility>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

// Reducing kernels: at most this many blocks, hence partials (about one wave on an H200). The grid depends on
// the element count and pack width only, never on the GPU, so the order of the sum is fixed by the shape.
constexpr int64_t kMaxReduceBlocks = 1024;
constexpr int kSumThreads = 256;  // the one block that adds the partials

// out, x, x_backout: (numel) bf16, flat; out = x - lambda * x_backout. out may alias x.
template <int kCount>
__global__ void backout_forward_kernel(__nv_bfloat16* out, const __nv_bfloat16* x,
                                       const __nv_bfloat16* x_backout, const float* lambda, int64_t numel) {
  const float lam = *lambda;
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    const Pack<__nv_bfloat16, kWidth> in = pack_at<kWidth>(x, i);
    const Pack<__nv_bfloat16, kWidth> snapshot = pack_at<kWidth>(x_backout, i);
    Pack<__nv_bfloat16, kWidth> result;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      result.values[k] =
          __float2bfloat16_rn(__bfloat162float(in.values[k]) - lam * __bfloat162float(snapshot.values[k]));
    }
    pack_at<kWidth>(out, i) = result;
  });
}

// d_x_backout, d_out, x_backout: (numel) bf16, flat. d_x_backout = -lambda * d_out; partials: (gridDim.x)
// f32, this block's sum of d_out * x_backout.
template <int kCount>
__global__ void backout_backward_kernel(__nv_bfloat16* d_x_backout, float* partials,
                                        const __nv_bfloat16* d_out, const __nv_bfloat16* x_backout,
                                        const float* lambda, int64_t numel) {
  __shared__ float shared[kWarpSize];
  const float lam = *lambda;
  float dot = 0;
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    const Pack<__nv_bfloat16, kWidth> grad = pack_at<kWidth>(d_out, i);
    const Pack<__nv_bfloat16, kWidth> snapshot = pack_at<kWidth>(x_backout, i);
    Pack<__nv_bfloat16, kWidth> result;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const float g = __bfloat162float(grad.values[k]);
      dot += g * __bfloat162float(snapshot.values[k]);
      result.values[k] = __float2bfloat16_rn(-lam * g);
    }
    pack_at<kWidth>(d_x_backout, i) = result;
  });
  dot = block_sum(dot, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = dot;
}

void check_scalar(const TensorView& t, const char* op, const char* name) {
  check_tensor(t, DType::kF32, op, name);
  NANOFORGE_CHECK(t.numel() == 1, "{} on CUDA: {} must have one element, got {}", op, name, t.describe());
}

void check_bf16(std::initializer_list<std::pair<const TensorView*, const char*>> tensors,
                const TensorView& like, const char* op) {
  for (const auto& [t, name] : tensors) {
    check_tensor(*t, DType::kBF16, op, name);
    check_same_shape(*t, like, op);
  }
}

// gradient (1) f32 += sign * (the sum of the `count` block partials at `partials`), added in double in a
// fixed order by one block and rounded to f32 once before the addition, as the CPU does.
void add_partials(TensorView gradient, const float* partials, int count, double sign) {
  launch_kernel<fold_partials_kernel<AddTotal>>(1, kSumThreads)(partials, count, /*values=*/1,
                                                                AddTotal{gradient.as<float>(), sign});
}

}  // namespace

void backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView lambda) {
  constexpr const char* kOp = "backout_forward";
  check_bf16({{&out, "out"}, {&x, "x"}, {&x_backout, "x_backout"}}, x, kOp);
  check_scalar(lambda, kOp, "lambda");
  const int64_t numel = x.numel();
  if (numel == 0) return;
  with_pack_count<__nv_bfloat16>(pack_aligned({out.data, x.data, x_backout.data}), [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<backout_forward_kernel<kCount>>(elementwise_blocks(numel, kCount), kElementwiseThreads)(
        out.as<__nv_bfloat16>(), x.as<__nv_bfloat16>(), x_backout.as<__nv_bfloat16>(), lambda.as<float>(),
        numel);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void backout_backward(TensorView d_x_backout, TensorView d_lambda, TensorView d_out, TensorView x_backout,
                      TensorView lambda) {
  constexpr const char* kOp = "backout_backward";
  check_bf16({{&d_x_backout, "d_x_backout"}, {&d_out, "d_out"}, {&x_backout, "x_backout"}}, x_backout, kOp);
  check_scalar(d_lambda, kOp, "d_lambda");
  check_scalar(lambda, kOp, "lambda");
  const int64_t numel = x_backout.numel();
  if (numel == 0) return;  // d_lambda gains an empty sum
  with_pack_count<__nv_bfloat16>(
      pack_aligned({d_x_backout.data, d_out.data, x_backout.data}), [&](auto count) {
        constexpr int kCount = decltype(count)::value;
        const int blocks = elementwise_blocks(numel, kCount, kMaxReduceBlocks);
        auto* partials = static_cast<float*>(device_scratch(blocks * static_cast<int64_t>(sizeof(float))));
        launch_kernel<backout_backward_kernel<kCount>>(blocks, kElementwiseThreads)(
            d_x_backout.as<__nv_bfloat16>(), partials, d_out.as<__nv_bfloat16>(),
            x_backout.as<__nv_bfloat16>(), lambda.as<float>(), numel);
        add_partials(d_lambda, partials, blocks, -1.0);  // d_lambda += -sum(d_out * x_backout)
      });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
