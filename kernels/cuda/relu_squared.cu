// ReLU^2, the MLP activation of nanochat, on the GPU: the CUDA twin of kernels/cpu/relu_squared.cpp, bf16 in
// and out, the backward from the forward's output (2 sqrt(out) d_out). relu(x)^2 of a bf16 value (8
// significant bits) is exact in fp32, so the one rounding to bf16 at the end is the forward's only error; the
// backward computes the CPU's fp32 operations (sqrtf is correctly rounded) before that rounding. The forward
// can take the max of what it writes, the amax of the FP8 GEMM that reads it (amax.cuh). Memory-bound
// grid-stride loops over 16-byte packs (8 bf16), then the tail one element per thread (for_each_pack); one
// element at a time throughout where a view is not 16-byte aligned. A thread reads every input of its
// elements before writing them, so out may alias x and d_x d_out.
#include "kernels/cuda/amax.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

// relu as the CPU writes it (a NaN gives 0).
__device__ inline float relu(float value) {
  return value > 0.0f ? value : 0.0f;
}

// out, x: (numel) bf16, flat; out = relu(x)^2; amax_bits, unless null, raised to max |out| (amax.cuh).
template <int kCount>
__global__ void relu_squared_forward_kernel(__nv_bfloat16* out, const __nv_bfloat16* x, int64_t numel,
                                            unsigned* amax_bits) {
  unsigned local_amax = 0;
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    const Pack<__nv_bfloat16, kWidth> in = pack_at<kWidth>(x, i);
    Pack<__nv_bfloat16, kWidth> result;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const float r = relu(__bfloat162float(in.values[k]));
      result.values[k] = __float2bfloat16_rn(r * r);
      local_amax = max(local_amax, abs_bits(__bfloat162float(result.values[k])));
    }
    pack_at<kWidth>(out, i) = result;
  });
  warp_raise_amax(amax_bits, local_amax);
}

// d_x, d_out, out: (numel) bf16, flat; d_x = 2 sqrt(out) d_out.
template <int kCount>
__global__ void relu_squared_backward_kernel(__nv_bfloat16* d_x, const __nv_bfloat16* d_out,
                                             const __nv_bfloat16* out, int64_t numel) {
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    const Pack<__nv_bfloat16, kWidth> in = pack_at<kWidth>(out, i);
    const Pack<__nv_bfloat16, kWidth> grad = pack_at<kWidth>(d_out, i);
    Pack<__nv_bfloat16, kWidth> result;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const float r = sqrtf(relu(__bfloat162float(in.values[k])));
      result.values[k] = __float2bfloat16_rn(2.0f * r * __bfloat162float(grad.values[k]));
    }
    pack_at<kWidth>(d_x, i) = result;
  });
}

}  // namespace

void relu_squared_forward(TensorView out, TensorView x, ops::AmaxOutput amax) {
  constexpr const char* kOp = "relu_squared_forward";
  check_tensor(out, DType::kBF16, kOp, "out");
  check_tensor(x, DType::kBF16, kOp, "x");
  check_same_shape(out, x, kOp);
  const int64_t numel = x.numel();
  unsigned* amax_bits = amax_word(amax, kOp);  // zeroed: the max of nothing is 0
  if (numel == 0) return;
  with_pack_count<__nv_bfloat16>(pack_aligned({out.data, x.data}), [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<relu_squared_forward_kernel<kCount>>(
        elementwise_blocks(numel, kCount), kElementwiseThreads)(out.as<__nv_bfloat16>(),
                                                                x.as<__nv_bfloat16>(), numel, amax_bits);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out) {
  constexpr const char* kOp = "relu_squared_backward";
  check_tensor(d_x, DType::kBF16, kOp, "d_x");
  check_tensor(d_out, DType::kBF16, kOp, "d_out");
  check_tensor(out, DType::kBF16, kOp, "out");
  check_same_shape(d_out, out, kOp);
  check_same_shape(d_x, out, kOp);
  const int64_t numel = out.numel();
  if (numel == 0) return;
  with_pack_count<__nv_bfloat16>(pack_aligned({d_x.data, d_out.data, out.data}), [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<relu_squared_backward_kernel<kCount>>(elementwise_blocks(numel, kCount),
                                                        kElementwiseThreads)(
        d_x.as<__nv_bfloat16>(), d_out.as<__nv_bfloat16>(), out.as<__nv_bfloat16>(), numel);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
