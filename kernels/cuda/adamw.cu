// AdamW on the GPU, the CUDA twin of kernels/cpu/adamw.cpp: one fused elementwise pass per parameter that
// decays the weight, updates both moments and takes the bias-corrected step, reading and writing each of the
// four fp32 tensors once (16 bytes per element each way: the kernel is memory-bound). The scalar factors are
// folded on the host in double and rounded to fp32 exactly as the CPU kernel does, and the per-element
// arithmetic is the CPU kernel's, in the same order.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
// An H200 keeps 132 SMs x 8 such blocks resident; beyond ~8 waves the loop strides instead.
constexpr int64_t kMaxBlocks = 8192;
constexpr int kCount = kElementsPer16Bytes<float>;  // 4 floats: one 16-byte access per tensor

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

// param, grad, exp_avg, exp_avg_sq: (numel) f32, flat. Whole packs of kCount first when `packed` (the
// launcher has checked every base is 16-byte aligned), then the remaining elements one per thread.
template <bool kPacked>
__global__ void adamw_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                             int64_t numel, AdamWFactors factors) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = kPacked ? numel / kCount : 0;
  for (int64_t i = first; i < packs; i += stride) {
    Pack<float, kCount> p = pack_at<kCount>(param, i);
    const Pack<float, kCount> g = pack_at<kCount>(grad, i);
    Pack<float, kCount> m = pack_at<kCount>(exp_avg, i);
    Pack<float, kCount> v = pack_at<kCount>(exp_avg_sq, i);
#pragma unroll
    for (int k = 0; k < kCount; ++k)
      adamw_element(p.values[k], g.values[k], m.values[k], v.values[k], factors);
    pack_at<kCount>(param, i) = p;
    pack_at<kCount>(exp_avg, i) = m;
    pack_at<kCount>(exp_avg_sq, i) = v;
  }
  for (int64_t i = packs * kCount + first; i < numel; i += stride)
    adamw_element(param[i], grad[i], exp_avg[i], exp_avg_sq[i], factors);
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
  const int64_t work_items = packed ? (numel + kCount - 1) / kCount : numel;
  const int blocks = static_cast<int>(
      std::clamp<int64_t>((work_items + kThreadsPerBlock - 1) / kThreadsPerBlock, 1, kMaxBlocks));
  if (packed) {
    adamw_kernel<true><<<blocks, kThreadsPerBlock>>>(param.as<float>(), grad.as<float>(), exp_avg.as<float>(),
                                                     exp_avg_sq.as<float>(), numel, factors);
  } else {
    adamw_kernel<false><<<blocks, kThreadsPerBlock>>>(
        param.as<float>(), grad.as<float>(), exp_avg.as<float>(), exp_avg_sq.as<float>(), numel, factors);
  }
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
