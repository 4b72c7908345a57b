// AdamW on the GPU, the CUDA twin of kernels/cpu/adamw.cpp: one fused elementwise pass per parameter that
// decays the weight, updates both moments and takes the bias-corrected step, reading and writing each of the
// four fp32 tensors once (16 bytes per element each way: the kernel is memory-bound). The scalar factors are
// folded on the host in double and rounded to fp32 exactly as the CPU kernel does, and the per-element
// arithmetic is the CPU kernel's, in the same order.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

// The hyperparameters as the CPU kernel rounds them to fp32.
struct AdamWFactors {
  float decay;           // 1 - lr * weight_decay
  float w1, w2;          // 1 - beta1, 1 - beta2: the lerp weights
  float step_size;       // lr / (1 - beta1^t)
  float inv_sqrt_bias2;  // 1 / sqrt(1 - beta2^t)
  float eps;
};

__device__ inline void adamw_element(float& p, float g, float& m, float& v, const AdamWFactors& f) {
  m += f.w1 * (g - m);
  v += f.w2 * (g * g - v);
  p = p * f.decay - f.step_size * m / (sqrtf(v) * f.inv_sqrt_bias2 + f.eps);
}

// param, grad, exp_avg, exp_avg_sq: (numel) f32, flat, in packs of kCount: 4 floats (one 16-byte access per
// tensor) when the launcher has checked every base is 16-byte aligned, else 1.
template <int kCount>
__global__ void adamw_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                             int64_t numel, AdamWFactors factors) {
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    Pack<float, kWidth> p = pack_at<kWidth>(param, i);
    const Pack<float, kWidth> g = pack_at<kWidth>(grad, i);
    Pack<float, kWidth> m = pack_at<kWidth>(exp_avg, i);
    Pack<float, kWidth> v = pack_at<kWidth>(exp_avg_sq, i);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      adamw_element(p.values[k], g.values[k], m.values[k], v.values[k], factors);
    pack_at<kWidth>(param, i) = p;
    pack_at<kWidth>(exp_avg, i) = m;
    pack_at<kWidth>(exp_avg_sq, i) = v;
  });
}

}  // namespace

void adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                  const ops::AdamWStep& hyper) {
  constexpr const char* kOp = "adamw_update";
  check_tensor(param, DType::kF32, kOp, "param");
  check_tensor(grad, DType::kF32, kOp, "grad");
  check_tensor(exp_avg, DType::kF32, kOp, "exp_avg");
  check_tensor(exp_avg_sq, DType::kF32, kOp, "exp_avg_sq");
  for (const TensorView* t : {&grad, &exp_avg, &exp_avg_sq})
    check_same_shape(*t, param, kOp);
  NANOFORGE_CHECK(hyper.step >= 1, "adamw_update: step counts from 1, got {}", hyper.step);
  const int64_t numel = param.numel();
  if (numel == 0) return;
  const double bias1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(hyper.step));
  const double bias2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(hyper.step));
  const AdamWFactors factors{static_cast<float>(1.0 - hyper.lr * hyper.weight_decay),
                             static_cast<float>(1.0 - hyper.beta1),
                             static_cast<float>(1.0 - hyper.beta2),
                             static_cast<float>(hyper.lr / bias1),
                             static_cast<float>(1.0 / std::sqrt(bias2)),
                             static_cast<float>(hyper.eps)};
  const bool packed = pack_aligned({param.data, grad.data, exp_avg.data, exp_avg_sq.data});
  with_pack_count<float>(packed, [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<adamw_kernel<kCount>>(elementwise_blocks(numel, kCount), kElementwiseThreads)(
        param.as<float>(), grad.as<float>(), exp_avg.as<float>(), exp_avg_sq.as<float>(), numel, factors);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
