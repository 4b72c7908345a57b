// The logit softcap fused with cross-entropy on the GPU, the CUDA twin of
// kernels/cpu/softcap_cross_entropy.cpp. One block per row reads the raw bf16 logits x, caps them in fp32 on
// the fly (z = c tanh(x / c), never stored) and keeps an fp32 online max / sum of exp(z - max); the
// forward-backward then sweeps the row again (from L2) and writes the gradient over it, scaled by
// loss_scale / (valid targets) computed on the device. sum_loss: one block, fp64, in a fixed order.
// Fast math (__expf, __fdividef; not tanh.approx.f32) and its error, which the tests' tolerances rest on:
// docs/kernels.md, "The loss pass".
#include <cmath>
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loss_totals.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int kThreadsPerRow = 512;
constexpr int kSumLossThreads = kLossTotalsThreads;

// Stops the kernel (and with it the CUDA context: the next synchronising call reports a launch failure) on a
// target outside [0, vocab) that is not the ignore index, which would otherwise silently lose the row's
// one-hot term. The CPU op reports it by name.
__device__ inline void check_target(int32_t target, int vocab) {
  if (target != kIgnoreIndex && (target < 0 || target >= vocab)) __trap();
}

// e^x on the hardware's exp2 unit (see the header for its error).
__device__ inline float fast_exp(float x) {
  return __expf(x);
}

// z = cap * tanh(x * inv_cap), tanh as 1 - 2 / (e^(2u) + 1): e^(2u) = inf gives 1, 0 gives -1.
__device__ inline float capped_logit(float x, float cap, float inv_cap) {
  const float e = fast_exp(2.0f * x * inv_cap);
  return cap * (1.0f - __fdividef(2.0f, e + 1.0f));
}

// Online softmax state: sum = sum of exp(z - max) over the values seen; max = -inf when none were.
struct MaxSum {
  float max;
  float sum;
};

// The state of the union of two sets of values. Commutative bit for bit (the larger max leads either way,
// and a tie adds the two sums, exp(0) = 1), so every lane of a shuffle butterfly ends with the same bits.
__device__ inline MaxSum combine(MaxSum a, MaxSum b) {
  if (b.max > a.max) {
    const MaxSum larger = b;
    b = a;
    a = larger;
  }
  if (b.max == -INFINITY) return a;  // b saw no values
  return {a.max, a.sum + b.sum * fast_exp(b.max - a.max)};
}

__device__ inline MaxSum warp_combine(MaxSum state) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, state.max, offset),
                       __shfl_xor_sync(0xffffffffu, state.sum, offset)};
    state = combine(state, other);
  }
  return state;
}

// The combined state of every thread of the block, returned to every thread (the shape of block_sum in
// reductions.cuh). blockDim.x must be a multiple of 32; ends with a barrier, so `shared` may be reused.
__device__ inline MaxSum block_combine(MaxSum state, MaxSum* shared) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  state = warp_combine(state);
  if (lane == 0) shared[warp] = state;
  __syncthreads();
  MaxSum total = lane < warps ? shared[lane] : MaxSum{-INFINITY, 0.0f};
  total = warp_combine(total);
  __syncthreads();
  return total;
}

// The forward of one row (the block's): logits_row (vocab) bf16 raw logits x, read only; thread i takes
// packs i, i + blockDim.x, ... With z = cap * tanh(x * inv_cap) in fp32, writes lse = log sum_j exp(z_j) and
// loss = lse - z[target] (0 where target = -1) for the row and returns lse to every thread. Ends with a
// barrier (block_combine's), so `shared` and `target_z` may be reused.
template <int kCount>
__device__ inline float row_forward(float* loss, float* lse, const __nv_bfloat16* logits_row, int32_t target,
                                    int vocab, float cap, float inv_cap, MaxSum* shared, float& target_z) {
  const int packs = vocab / kCount;
  MaxSum state{-INFINITY, 0.0f};
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<__nv_bfloat16, kCount> values = pack_at<kCount>(logits_row, p);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float z = capped_logit(__bfloat162float(values.values[k]), cap, inv_cap);
      if (z > state.max) {
        state.sum = state.sum * fast_exp(state.max - z) + 1.0f;
        state.max = z;
      } else {
        state.sum += fast_exp(z - state.max);
      }
      if (p * kCount + k == target) target_z = z;
    }
  }
  state = block_combine(state, shared);  // its barriers also publish target_z
  const float row_lse = state.max + logf(state.sum);
  if (threadIdx.x == 0) {
    *lse = row_lse;
    *loss = target == kIgnoreIndex ? 0.0f : row_lse - target_z;
  }
  return row_lse;
}

// logits: (rows, vocab) bf16 raw logits x, read only; losses, lse: (rows) f32; targets: (rows) i32. Block =
// row (row_forward).
template <int kCount>
__global__ void __launch_bounds__(kThreadsPerRow)
    softcap_cross_entropy_forward_kernel(float* losses, float* lse, const __nv_bfloat16* logits,
                                         const int32_t* targets, int vocab, float cap, float inv_cap) {
  __shared__ MaxSum shared[kWarpSize];
  __shared__ float target_z;  // written by the thread that meets the target column, read after the barriers
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  check_target(target, vocab);
  row_forward<kCount>(losses + row, lse + row, logits + row * vocab, target, vocab, cap, inv_cap, shared,
                      target_z);
}

// targets (rows) i32; one block. grad_scale = loss_scale / (the number of targets that are not -1), 0 when
// there are none. Counted per thread, then block_sum: an exact integer either way.
__global__ void __launch_bounds__(kSumLossThreads)
    loss_gradient_scale_kernel(float* grad_scale, const int32_t* targets, int64_t rows, double loss_scale) {
  __shared__ long long shared_count[kWarpSize];
  long long count = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    count += targets[i] != kIgnoreIndex ? 1 : 0;
  count = block_sum(count, shared_count);
  if (threadIdx.x == 0)
    *grad_scale = count > 0 ? static_cast<float>(loss_scale / static_cast<double>(count)) : 0.0f;
}

// logits: (rows, vocab) bf16, the raw logits x in, their gradient out; losses, lse: (rows) f32; targets:
// (rows) i32; grad_scale: one f32 (loss_gradient_scale_kernel's). Block = row: row_forward, then a second
// sweep over the row (L2-resident: this block read it just now) that recomputes z in fp32 as the forward did
// and writes, with q = z / cap (each thread writes only the packs it reads),
//   d = grad_scale * (exp(z - lse) - [j = target]) * (1 - q^2), or 0 for a row whose target is -1
template <int kCount>
__global__ void __launch_bounds__(kThreadsPerRow)
    softcap_cross_entropy_forward_backward_kernel(float* losses, float* lse, __nv_bfloat16* logits,
                                                  const int32_t* targets, const float* grad_scale, int vocab,
                                                  float cap, float inv_cap) {
  __shared__ MaxSum shared[kWarpSize];
  __shared__ float target_z;
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  check_target(target, vocab);
  __nv_bfloat16* row_logits = logits + row * vocab;
  const float row_lse =
      row_forward<kCount>(losses + row, lse + row, row_logits, target, vocab, cap, inv_cap, shared, target_z);
  const int packs = vocab / kCount;
  const float scale = target == kIgnoreIndex ? 0.0f : *grad_scale;
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<__nv_bfloat16, kCount> x = pack_at<kCount>(row_logits, p);
    Pack<__nv_bfloat16, kCount> grad;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float z = capped_logit(__bfloat162float(x.values[k]), cap, inv_cap);
      const float capped = z * inv_cap;
      const float tanh_slope = 1.0f - capped * capped;
      float g = scale * fast_exp(z - row_lse) * tanh_slope;
      if (p * kCount + k == target) g -= scale * tanh_slope;
      grad.values[k] = __float2bfloat16_rn(g);
    }
    pack_at<kCount>(row_logits, p) = grad;
  }
}

// losses: (rows) f32, targets: (rows) i32; one block: the kept rows' loss sum and count (block_loss_totals).
__global__ void __launch_bounds__(kSumLossThreads)
    sum_loss_kernel(LossTotals* totals, const float* losses, const int32_t* targets, int64_t rows) {
  const LossTotals block_totals = block_loss_totals(losses, targets, rows);
  if (threadIdx.x == 0) *totals = block_totals;
}

// The rows and vocabulary of the (rows, vocab) logits, checked against the per-row tensors and the launch.
struct LossShape {
  int64_t rows;
  int vocab;
};

LossShape loss_shape(const TensorView& logits, const TensorView& targets, const TensorView& per_row,
                     double softcap, const char* op) {
  check_rank(logits, 2, op, "logits");
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  NANOFORGE_CHECK(targets.numel() == rows && per_row.numel() == rows,
                  "{} on CUDA: targets {} and per-row {} must have one entry per logits row {}", op,
                  targets.describe(), per_row.describe(), logits.describe());
  NANOFORGE_CHECK(softcap > 0, "{} on CUDA: softcap must be positive, got {}", op, softcap);
  NANOFORGE_CHECK(
      vocab >= 1 && vocab <= std::numeric_limits<int>::max() && rows <= std::numeric_limits<int>::max(),
      "{} on CUDA: logits {} must have 1 to 2^31 - 1 columns and at most 2^31 - 1 rows", op,
      logits.describe());
  return {rows, static_cast<int>(vocab)};
}

}  // namespace

void softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                   double softcap) {
  constexpr const char* kOp = "softcap_cross_entropy_forward";
  check_tensor(losses, DType::kF32, kOp, "losses");
  check_tensor(lse, DType::kF32, kOp, "lse");
  check_tensor(logits, DType::kBF16, kOp, "logits");
  check_tensor(targets, DType::kI32, kOp, "targets");
  const LossShape shape = loss_shape(logits, targets, losses, softcap, kOp);
  NANOFORGE_CHECK(lse.numel() == shape.rows, "{} on CUDA: lse {} needs one entry per logits row {}", kOp,
                  lse.describe(), logits.describe());
  if (shape.rows == 0) return;
  with_pack_count<__nv_bfloat16>(rows_packable<__nv_bfloat16>(shape.vocab, {logits.data}), [&](auto count) {
    launch_kernel<softcap_cross_entropy_forward_kernel<decltype(count)::value>>(static_cast<int>(shape.rows),
                                                                                kThreadsPerRow)(
        losses.as<float>(), lse.as<float>(), logits.as<__nv_bfloat16>(), targets.as<int32_t>(), shape.vocab,
        static_cast<float>(softcap), static_cast<float>(1.0 / softcap));
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                            TensorView targets, double softcap, double loss_scale) {
  constexpr const char* kOp = "softcap_cross_entropy_forward_backward";
  check_tensor(losses, DType::kF32, kOp, "losses");
  check_tensor(lse, DType::kF32, kOp, "lse");
  check_tensor(logits, DType::kBF16, kOp, "logits");
  check_tensor(targets, DType::kI32, kOp, "targets");
  const LossShape shape = loss_shape(logits, targets, losses, softcap, kOp);
  NANOFORGE_CHECK(lse.numel() == shape.rows, "{} on CUDA: lse {} needs one entry per logits row {}", kOp,
                  lse.describe(), logits.describe());
  if (shape.rows == 0) return;
  auto* grad_scale = static_cast<float*>(device_scratch(sizeof(float)));
  launch_kernel<loss_gradient_scale_kernel>(1, kSumLossThreads)(grad_scale, targets.as<int32_t>(), shape.rows,
                                                                loss_scale);
  with_pack_count<__nv_bfloat16>(rows_packable<__nv_bfloat16>(shape.vocab, {logits.data}), [&](auto count) {
    launch_kernel<softcap_cross_entropy_forward_backward_kernel<decltype(count)::value>>(
        static_cast<int>(shape.rows), kThreadsPerRow)(
        losses.as<float>(), lse.as<float>(), logits.as<__nv_bfloat16>(), targets.as<int32_t>(), grad_scale,
        shape.vocab, static_cast<float>(softcap), static_cast<float>(1.0 / softcap));
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

ops::LossSum sum_loss(TensorView losses, TensorView targets) {
  constexpr const char* kOp = "sum_loss";
  check_tensor(losses, DType::kF32, kOp, "losses");
  check_tensor(targets, DType::kI32, kOp, "targets");
  NANOFORGE_CHECK(losses.numel() == targets.numel(), "{} on CUDA: losses {} and targets {} differ in length",
                  kOp, losses.describe(), targets.describe());
  if (losses.numel() == 0) return {};
  auto* device_totals = static_cast<LossTotals*>(device_scratch(sizeof(LossTotals)));
  auto* host_totals = static_cast<LossTotals*>(host_scratch(sizeof(LossTotals)));
  launch_kernel<sum_loss_kernel>(1, kSumLossThreads)(device_totals, losses.as<float>(), targets.as<int32_t>(),
                                                     losses.numel());
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
  NANOFORGE_CUDA_CHECK(cudaMemcpyAsync(host_totals, device_totals, sizeof(LossTotals), cudaMemcpyDeviceToHost,
                                       /*stream=*/nullptr));
  NANOFORGE_CUDA_CHECK(cudaStreamSynchronize(/*stream=*/nullptr));
  return {host_totals->sum, static_cast<int64_t>(host_totals->count)};
}

}  // namespace nanoforge::cuda
