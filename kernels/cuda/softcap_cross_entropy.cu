// The logit softcap fused with cross-entropy on the GPU, the CUDA twin of
// kernels/cpu/softcap_cross_entropy.cpp. Forward: one block per row (V = 32768 logits: 8 bf16 16-byte packs
// per thread) reads the raw bf16 logits x once, caps them in fp32 on the fly (z = c tanh(x / c), as nanochat
// caps fp32 copies of its bf16 logits) and keeps an fp32 online max / sum of exp(z - max) per thread,
// combined over the block in a fixed tree; z is never stored, so neither an fp32 copy of the logits nor a
// bf16 rounding of z exists. Backward: elementwise, recomputing z in fp32 from the same raw logits and
// writing the gradient over them in place. sum_loss: one block sums the per-row
// losses in a fixed order (fp64) and the host reads the result back with one 16-byte copy.
#include <cmath>
#include <limits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

constexpr int32_t kIgnoreIndex = -1;  // nanochat's F.cross_entropy(ignore_index=-1)
constexpr int kThreadsPerRow = 512;
constexpr int kSumLossThreads = 1024;

// Stops the kernel (and with it the CUDA context: the next synchronising call reports a launch failure) on a
// target outside [0, vocab) that is not the ignore index, which would otherwise silently lose the row's
// one-hot term. The CPU op reports it by name.
__device__ inline void check_target(int32_t target, int vocab) {
  if (target != kIgnoreIndex && (target < 0 || target >= vocab)) __trap();
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
  return {a.max, a.sum + b.sum * expf(b.max - a.max)};
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

// logits: (rows, vocab) bf16 raw logits x, read only; losses, lse: (rows) f32; targets: (rows) i32. Block =
// row; thread i takes packs i, i + blockDim.x, ... With z = cap * tanh(x * inv_cap) in fp32:
//   lse = log sum_j exp(z_j);  loss = lse - z[target], or 0 where target = -1
template <int kCount>
__global__ void __launch_bounds__(kThreadsPerRow)
    softcap_cross_entropy_forward_kernel(float* losses, float* lse, const __nv_bfloat16* logits,
                                         const int32_t* targets, int vocab, float cap, float inv_cap) {
  __shared__ MaxSum shared[kWarpSize];
  __shared__ float target_z;  // written by the thread that meets the target column, read after the barriers
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  check_target(target, vocab);
  const __nv_bfloat16* row_logits = logits + row * vocab;
  const int packs = vocab / kCount;

  MaxSum state{-INFINITY, 0.0f};
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<__nv_bfloat16, kCount> values = pack_at<kCount>(row_logits, p);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float z = cap * tanhf(__bfloat162float(values.values[k]) * inv_cap);
      if (z > state.max) {
        state.sum = state.sum * expf(state.max - z) + 1.0f;
        state.max = z;
      } else {
        state.sum += expf(z - state.max);
      }
      if (p * kCount + k == target) target_z = z;
    }
  }
  state = block_combine(state, shared);
  if (threadIdx.x == 0) {
    const float row_lse = state.max + logf(state.sum);
    lse[row] = row_lse;
    losses[row] = target == kIgnoreIndex ? 0.0f : row_lse - target_z;
  }
}

// d_logits, logits: (rows, vocab) bf16 (the raw logits x), either the same memory or disjoint; lse: (rows)
// f32; targets: (rows) i32. Each thread reads the packs it writes, so in place is safe. With z = cap *
// tanh(x * inv_cap) recomputed in fp32 as the forward did, and q = z / cap:
//   d_logits = scale * (exp(z - lse) - [j = target]) * (1 - q^2), or 0 for a row whose target is -1
template <int kCount>
__global__ void __launch_bounds__(kThreadsPerRow)
    softcap_cross_entropy_backward_kernel(__nv_bfloat16* d_logits, const __nv_bfloat16* logits,
                                          const float* lse, const int32_t* targets, int vocab, float cap,
                                          float inv_cap, float scale) {
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  check_target(target, vocab);
  const __nv_bfloat16* x_row = logits + row * vocab;
  __nv_bfloat16* d_row = d_logits + row * vocab;
  const int packs = vocab / kCount;

  if (target == kIgnoreIndex) {
    Pack<__nv_bfloat16, kCount> zeros;
#pragma unroll
    for (int k = 0; k < kCount; ++k)
      zeros.values[k] = __float2bfloat16_rn(0.0f);
    for (int p = threadIdx.x; p < packs; p += blockDim.x)
      pack_at<kCount>(d_row, p) = zeros;
    return;
  }
  const float row_lse = lse[row];
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<__nv_bfloat16, kCount> x = pack_at<kCount>(x_row, p);
    Pack<__nv_bfloat16, kCount> grad;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float z = cap * tanhf(__bfloat162float(x.values[k]) * inv_cap);
      const float capped = z * inv_cap;
      const float tanh_slope = 1.0f - capped * capped;
      float g = scale * expf(z - row_lse) * tanh_slope;
      if (p * kCount + k == target) g -= scale * tanh_slope;
      grad.values[k] = __float2bfloat16_rn(g);
    }
    pack_at<kCount>(d_row, p) = grad;
  }
}

// What sum_loss reads back: the sum of the kept rows' losses and their count.
struct LossTotals {
  double sum;
  long long count;
};

// losses: (rows) f32, targets: (rows) i32; one block. Thread i sums rows i, i + blockDim.x, ... in fp64 (and
// counts them), then block_sum adds the threads in its fixed tree: the same bits on every run.
__global__ void __launch_bounds__(kSumLossThreads)
    sum_loss_kernel(LossTotals* totals, const float* losses, const int32_t* targets, int64_t rows) {
  __shared__ double shared_sum[kWarpSize];
  __shared__ long long shared_count[kWarpSize];
  double sum = 0;
  long long count = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    if (targets[i] == kIgnoreIndex) continue;
    sum += losses[i];
    ++count;
  }
  sum = block_sum(sum, shared_sum);
  count = block_sum(count, shared_count);
  if (threadIdx.x == 0) *totals = {sum, count};
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

void softcap_cross_entropy_backward(TensorView d_logits, TensorView logits, TensorView lse,
                                    TensorView targets, double softcap, double grad_scale) {
  constexpr const char* kOp = "softcap_cross_entropy_backward";
  check_tensor(d_logits, DType::kBF16, kOp, "d_logits");
  check_tensor(logits, DType::kBF16, kOp, "logits");
  check_tensor(lse, DType::kF32, kOp, "lse");
  check_tensor(targets, DType::kI32, kOp, "targets");
  const LossShape shape = loss_shape(logits, targets, lse, softcap, kOp);
  check_same_shape(d_logits, logits, kOp);
  const char* d_begin = static_cast<const char*>(d_logits.data);
  const char* x_begin = static_cast<const char*>(logits.data);
  NANOFORGE_CHECK(
      d_begin == x_begin || d_begin + d_logits.bytes() <= x_begin || x_begin + logits.bytes() <= d_begin,
      "{} on CUDA: d_logits {} must be the logits {} themselves or not overlap them", kOp,
      d_logits.describe(), logits.describe());
  if (shape.rows == 0) return;
  const bool packable = rows_packable<__nv_bfloat16>(shape.vocab, {d_logits.data, logits.data});
  with_pack_count<__nv_bfloat16>(packable, [&](auto count) {
    launch_kernel<softcap_cross_entropy_backward_kernel<decltype(count)::value>>(static_cast<int>(shape.rows),
                                                                                 kThreadsPerRow)(
        d_logits.as<__nv_bfloat16>(), logits.as<__nv_bfloat16>(), lse.as<float>(), targets.as<int32_t>(),
        shape.vocab, static_cast<float>(softcap), static_cast<float>(1.0 / softcap),
        static_cast<float>(grad_scale));
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
