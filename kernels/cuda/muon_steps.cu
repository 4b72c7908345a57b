// The elementwise and norm steps of nanochat's Muon on the GPU, the CUDA twin of kernels/cpu/muon_steps.cpp
// (same math; the Polar Express products go through matmul), and squared_norm for the global gradient norm.
// Momentum, moments and parameters are fp32; the matrix being orthogonalised (x, g, update) is bf16 or fp32.
// Every norm is a deterministic reduction with no atomics and no host round trip: a statistics kernel writes
// fp32 partial sums of squares (per block, per row or per column) to device scratch, one block folds them in
// a fixed order in double and turns them into scale factors there, and an apply kernel reads the factors.
// The same inputs give the same bits on every run.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

// Blocks of the statistics and row kernels (the elementwise ones run kElementwiseThreads, also 256).
constexpr int kThreadsPerBlock = 256;
// Elementwise kernels that mix fp32 state with a bf16 or fp32 tensor move 4 elements per access: 16 bytes of
// fp32, 8 of bf16.
constexpr int kMixedCount = kElementsPer16Bytes<float>;
// The whole-tensor sum of squares: each thread of the first pass sums at most this many packs, so an fp32
// partial holds at most 16 squares before the block's tree (kept short for accuracy; the grid grows instead).
constexpr int kPacksPerThread = 2;
// The single block that folds partial sums.
constexpr int kFoldThreads = 1024;
// Row-wise kernels: one warp per row, 8 rows per 256-thread block.
constexpr int kRowsPerBlock = kThreadsPerBlock / kWarpSize;
// Column sums: a block covers 32 columns, its 8 warps take every 8th row, then one warp adds the 8 slices.
constexpr int kColumnSlices = 8;
// Where in the scratch a reduction's scalar results go (a double total, an fp32 factor); partials follow.
constexpr int64_t kResultBytes = 256;

// Calls fn(std::type_identity<T>{}) with T the element type of the bf16-or-f32 tensor `t`.
template <class Fn>
void with_element_type(const TensorView& t, const char* op, const char* name, Fn&& fn) {
  check_on_gpu(t, op, name);
  NANOFORGE_CHECK(t.dtype == DType::kBF16 || t.dtype == DType::kF32,
                  "{} on CUDA: {} must be bf16 or f32, got {}", op, name, t.describe());
  if (t.dtype == DType::kF32) {
    fn(std::type_identity<float>{});
  } else {
    fn(std::type_identity<__nv_bfloat16>{});
  }
}

// Two tensors whose elements a kernel pairs up by index must be the same memory or not overlap at all.
void check_alias_or_disjoint(const TensorView& x, const TensorView& y, const char* op) {
  const auto* x_begin = static_cast<const char*>(x.data);
  const auto* y_begin = static_cast<const char*>(y.data);
  const bool disjoint = x_begin + x.bytes() <= y_begin || y_begin + y.bytes() <= x_begin;
  NANOFORGE_CHECK(disjoint || (x_begin == y_begin && x.dtype == y.dtype),
                  "{} on CUDA: {} and {} overlap without being the same tensor", op, x.describe(),
                  y.describe());
}

// ---- Nesterov momentum and the cautious update: elementwise ----

// update: (numel) U, momentum and grad: (numel) f32. update may alias grad: each thread reads its elements
// before writing them.
//   momentum = lerp(momentum, grad, 1 - mu);  update = lerp(grad, momentum, mu)
template <class U, int kCount>
__global__ void nesterov_momentum_kernel(U* update, float* momentum, const float* grad, int64_t numel,
                                         float mu, float one_minus_mu) {
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    const Pack<float, kWidth> g = pack_at<kWidth>(grad, i);
    Pack<float, kWidth> m = pack_at<kWidth>(momentum, i);
    Pack<U, kWidth> out;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      m.values[k] += one_minus_mu * (g.values[k] - m.values[k]);
      out.values[k] = from_float<U>(g.values[k] + mu * (m.values[k] - g.values[k]));
    }
    pack_at<kWidth>(momentum, i) = m;
    pack_at<kWidth>(update, i) = out;
  });
}

__device__ inline float cautious_step(float p, float u, float rate, float decay) {
  const float mask = u * p >= 0.0f ? 1.0f : 0.0f;
  return p - rate * u - decay * p * mask;
}

// param: (numel) f32, update: (numel) U. p -= lr * u + lr * wd * p * [u * p >= 0].
template <class U, int kCount>
__global__ void cautious_weight_decay_kernel(float* param, const U* update, int64_t numel, float rate,
                                             float decay) {
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    Pack<float, kWidth> p = pack_at<kWidth>(param, i);
    const Pack<U, kWidth> u = pack_at<kWidth>(update, i);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      p.values[k] = cautious_step(p.values[k], to_float(u.values[k]), rate, decay);
    pack_at<kWidth>(param, i) = p;
  });
}

// ---- sums of squares: the statistics kernels ----

// partials: (gridDim.x) f32, one per block; x: (numel) T, flat, read as numel / kCount packs (grid-stride,
// at most kPacksPerThread per thread), then block 0 adds the numel % kCount trailing elements.
template <class T, int kCount>
__global__ void squares_partials_kernel(float* partials, const T* x, int64_t numel) {
  __shared__ float shared[kWarpSize];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = numel / kCount;
  float sum = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const Pack<T, kCount> in = pack_at<kCount>(x, i);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float value = to_float(in.values[k]);
      sum += value * value;
    }
  }
  const int64_t tail = packs * kCount + threadIdx.x;  // fewer than kCount <= blockDim.x trailing elements
  if (blockIdx.x == 0 && tail < numel) {
    const float value = to_float(x[tail]);
    sum += value * value;
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// row_squares: (rows) f32; x: (rows, cols) T, row-major, each row cols / kCount packs; lane l of the row's
// warp sums packs l, l + 32, ...
template <class T, int kCount>
__global__ void row_squares_kernel(float* row_squares, const T* x, int64_t rows, int cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const T* x_row = x + row * cols;
  float sum = 0;
  for (int p = lane; p < cols / kCount; p += kWarpSize) {
    const Pack<T, kCount> in = pack_at<kCount>(x_row, p);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float value = to_float(in.values[k]);
      sum += value * value;
    }
  }
  sum = warp_sum(sum);
  if (lane == 0) row_squares[row] = sum;
}

// column_squares: (cols) f32; x: (rows, cols) T, row-major. Block (32, kColumnSlices) covers columns
// [32 blockIdx.x, +32): thread (c, s) sums rows s, s + 8, ... of its column, then thread (c, 0) adds the 8
// slices in order. A warp reads 32 consecutive elements of one row.
template <class T>
__global__ void column_squares_kernel(float* column_squares, const T* x, int64_t rows, int cols) {
  __shared__ float slices[kColumnSlices][kWarpSize];
  const int column = static_cast<int>(blockIdx.x) * kWarpSize + static_cast<int>(threadIdx.x);
  float sum = 0;
  if (column < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kColumnSlices) {
      const float value = to_float(x[r * cols + column]);
      sum += value * value;
    }
  }
  slices[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && column < cols) {
    float total = 0;
    for (int s = 0; s < kColumnSlices; ++s)
      total += slices[s][threadIdx.x];
    column_squares[column] = total;
  }
}

// ---- folding the statistics into factors: one block ----

// The finishes of fold_partials_kernel (reductions.cuh) over the whole-tensor partials, one column.
struct StoreTotal {
  double* total;
  __device__ void operator()(int /*column*/, double sum) const { *total = sum; }
};

// add_squared_norm: the total kept on the device grows by the sum.
struct AddToTotal {
  double* total;
  __device__ void operator()(int /*column*/, double sum) const { *total += sum; }
};

// normalize_frobenius: factor = 1 / (||x||_F * multiplier + eps).
struct NormalizeFactor {
  float* factor;
  double multiplier, eps;
  __device__ void operator()(int /*column*/, double sum) const {
    *factor = static_cast<float>(1.0 / (sqrt(sum) * multiplier + eps));
  }
};

// rescale_frobenius: factor = target_norm / max(||x||_F, eps).
struct RescaleFactor {
  float* factor;
  double target_norm, eps;
  __device__ void operator()(int /*column*/, double sum) const {
    *factor = static_cast<float>(target_norm / fmax(sqrt(sum), eps));
  }
};

// MuonEq: row_stats holds each row's sum of squares and is overwritten with the row's factor
// target / max(||row||, 1e-6), target = ||x||_F / sqrt(rows). A thread rewrites only the rows it read in the
// second loop, and every read of the first loop precedes block_sum's barriers.
__global__ void equilibrate_factors_kernel(float* row_stats, int64_t rows) {
  __shared__ double shared[kWarpSize];
  double total = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    total += row_stats[r];
  total = block_sum(total, shared);
  const double target = sqrt(total) / sqrt(static_cast<double>(rows));
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    row_stats[r] = static_cast<float>(target / fmax(sqrt(static_cast<double>(row_stats[r])), 1e-6));
}

// NorMuon: group_stats holds each group's (row's or column's) sum of squares over `reduced` elements and is
// overwritten with the group's multiplier step * rescale; second_moment (groups) f32 is updated in place.
//   s = lerp(s, mean(g^2), 1 - beta2); step = rsqrt(max(s, 1e-10));
//   rescale = ||g||_F / max(||g * step||_F, 1e-10)
// Each thread owns groups tid, tid + blockDim.x, ...: it rereads in the second loop only what it wrote.
__global__ void normuon_multipliers_kernel(float* group_stats, float* second_moment, int64_t groups,
                                           int64_t reduced, float one_minus_beta2) {
  __shared__ double shared[kWarpSize];
  double norm_squared = 0, new_norm_squared = 0;
  for (int64_t group = threadIdx.x; group < groups; group += blockDim.x) {
    const double squares = group_stats[group];
    const auto mean = static_cast<float>(squares / static_cast<double>(reduced));
    const float state = second_moment[group] + one_minus_beta2 * (mean - second_moment[group]);
    second_moment[group] = state;
    const double step = 1.0 / sqrt(fmax(static_cast<double>(state), 1e-10));
    norm_squared += squares;
    new_norm_squared += squares * step * step;
  }
  norm_squared = block_sum(norm_squared, shared);
  new_norm_squared = block_sum(new_norm_squared, shared);
  const double rescale = sqrt(norm_squared) / fmax(sqrt(new_norm_squared), 1e-10);
  for (int64_t group = threadIdx.x; group < groups; group += blockDim.x) {
    const double step = 1.0 / sqrt(fmax(static_cast<double>(second_moment[group]), 1e-10));
    group_stats[group] = static_cast<float>(step * rescale);
  }
}

// ---- applying the factors ----

// x: (numel) T, flat; x *= factor[0].
template <class T, int kCount>
__global__ void scale_all_kernel(T* x, int64_t numel, const float* factor) {
  const float multiplier = *factor;
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    Pack<T, kWidth> values = pack_at<kWidth>(x, i);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      values.values[k] = from_float<T>(to_float(values.values[k]) * multiplier);
    pack_at<kWidth>(x, i) = values;
  });
}

// x: (rows, cols) T, row-major, one warp per row; x[r, c] *= multipliers[c] (kPerColumn) or multipliers[r].
template <class T, int kCount, bool kPerColumn>
__global__ void scale_rows_kernel(T* x, int64_t rows, int cols, const float* multipliers) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  T* x_row = x + row * cols;
  float multiplier = 0;
  if constexpr (!kPerColumn) multiplier = multipliers[row];
  for (int p = lane; p < cols / kCount; p += kWarpSize) {
    Pack<T, kCount> values = pack_at<kCount>(x_row, p);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      if constexpr (kPerColumn) multiplier = multipliers[p * kCount + k];
      values.values[k] = from_float<T>(to_float(values.values[k]) * multiplier);
    }
    pack_at<kCount>(x_row, p) = values;
  }
}

// ---- launchers ----

// The grid of the whole-tensor sum of squares, and a device scratch laid out as [results | partials].
struct SquaresLaunch {
  bool packed = false;
  int blocks = 0;
  char* scratch = nullptr;
  float* partials() const { return reinterpret_cast<float*>(scratch + kResultBytes); }
};

template <class T>
SquaresLaunch plan_squares(const TensorView& x) {
  SquaresLaunch launch;
  launch.packed = pack_aligned({x.data});
  const int64_t count = launch.packed ? kElementsPer16Bytes<T> : 1;
  const int64_t per_block = int64_t{kThreadsPerBlock} * kPacksPerThread;
  const int64_t blocks = std::max<int64_t>(1, (x.numel() / count + per_block - 1) / per_block);
  NANOFORGE_CHECK(blocks <= std::numeric_limits<int>::max(), "sum of squares on CUDA: {} is too large",
                  x.describe());
  launch.blocks = static_cast<int>(blocks);
  launch.scratch = static_cast<char*>(device_scratch(kResultBytes + blocks * int64_t{sizeof(float)}));
  return launch;
}

// x's sum of squares, folded by finish(total) on the device.
template <class T, class Finish>
void sum_of_squares(const TensorView& x, const SquaresLaunch& launch, Finish finish, const char* op) {
  with_pack_count<T>(launch.packed, [&](auto count) {
    launch_kernel<squares_partials_kernel<T, decltype(count)::value>>(launch.blocks, kThreadsPerBlock)(
        launch.partials(), x.as<T>(), x.numel());
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(op);
  launch_kernel<fold_partials_kernel<Finish>>(1, kFoldThreads)(launch.partials(), launch.blocks, /*values=*/1,
                                                               finish);
  NANOFORGE_CUDA_CHECK_LAUNCH(op);
}

// x *= the fp32 factor the previous kernel left at `factor`.
template <class T>
void scale_all(const TensorView& x, const float* factor, const char* op) {
  const int64_t numel = x.numel();
  with_pack_count<T>(pack_aligned({x.data}), [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<scale_all_kernel<T, kCount>>(elementwise_blocks(numel, kCount), kElementwiseThreads)(
        x.as<T>(), numel, factor);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(op);
}

// x (bf16 or f32) *= a factor computed on the device from x's sum of squares by the finish
// make_finish(factor) returns, which writes it to `factor`: normalize_frobenius and rescale_frobenius differ
// only in that finish.
template <class MakeFinish>
void scale_by_frobenius_factor(const TensorView& x, const char* op, MakeFinish make_finish) {
  with_element_type(x, op, "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (x.numel() == 0) return;
    const SquaresLaunch launch = plan_squares<T>(x);
    auto* factor = reinterpret_cast<float*>(launch.scratch);
    sum_of_squares<T>(x, launch, make_finish(factor), op);
    scale_all<T>(x, factor, op);
  });
}

// The rows and columns of a 2-D tensor, checked to fit the row kernels' index types.
struct MatrixShape {
  int64_t rows;
  int cols;
  int row_blocks() const { return static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }
};

MatrixShape matrix_shape(const TensorView& x, const char* op, const char* name) {
  check_rank(x, 2, op, name);
  NANOFORGE_CHECK(x.shape[1] <= std::numeric_limits<int>::max() &&
                      (x.shape[0] + kRowsPerBlock - 1) / kRowsPerBlock <= std::numeric_limits<int>::max(),
                  "{} on CUDA: {} {} is too large for one launch", op, name, x.describe());
  return {x.shape[0], static_cast<int>(x.shape[1])};
}

template <class T>
void row_squares(const TensorView& x, const MatrixShape& shape, float* out, const char* op) {
  with_pack_count<T>(rows_packable<T>(shape.cols, {x.data}), [&](auto count) {
    launch_kernel<row_squares_kernel<T, decltype(count)::value>>(shape.row_blocks(), kThreadsPerBlock)(
        out, x.as<T>(), shape.rows, shape.cols);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(op);
}

template <class T, bool kPerColumn>
void scale_rows(const TensorView& x, const MatrixShape& shape, const float* multipliers, const char* op) {
  with_pack_count<T>(rows_packable<T>(shape.cols, {x.data}), [&](auto count) {
    launch_kernel<scale_rows_kernel<T, decltype(count)::value, kPerColumn>>(
        shape.row_blocks(), kThreadsPerBlock)(x.as<T>(), shape.rows, shape.cols, multipliers);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH(op);
}

}  // namespace

void muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad, double momentum) {
  constexpr const char* kOp = "muon_nesterov_momentum";
  check_tensor(momentum_buffer, DType::kF32, kOp, "momentum_buffer");
  check_tensor(grad, DType::kF32, kOp, "grad");
  check_same_shape(update, grad, kOp);
  check_same_shape(momentum_buffer, grad, kOp);
  with_element_type(update, kOp, "update", [&](auto tag) {
    using U = typename decltype(tag)::type;
    check_alias_or_disjoint(update, grad, kOp);
    const int64_t numel = grad.numel();
    if (numel == 0) return;
    const bool packed = aligned_to(update.data, sizeof(U) * kMixedCount) &&
                        aligned_to(momentum_buffer.data, sizeof(float) * kMixedCount) &&
                        aligned_to(grad.data, sizeof(float) * kMixedCount);
    const auto mu = static_cast<float>(momentum), one_minus_mu = static_cast<float>(1.0 - momentum);
    with_pack_of<kMixedCount>(packed, [&](auto count) {
      constexpr int kCount = decltype(count)::value;
      launch_kernel<nesterov_momentum_kernel<U, kCount>>(
          elementwise_blocks(numel, kCount), kElementwiseThreads)(update.as<U>(), momentum_buffer.as<float>(),
                                                                  grad.as<float>(), numel, mu, one_minus_mu);
    });
    NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
  });
}

void muon_equilibrate_rows(TensorView x) {
  constexpr const char* kOp = "muon_equilibrate_rows";
  with_element_type(x, kOp, "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const MatrixShape shape = matrix_shape(x, kOp, "x");
    if (x.numel() == 0) return;
    auto* row_stats = static_cast<float*>(device_scratch(shape.rows * int64_t{sizeof(float)}));
    row_squares<T>(x, shape, row_stats, kOp);
    launch_kernel<equilibrate_factors_kernel>(1, kFoldThreads)(row_stats, shape.rows);
    NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
    scale_rows<T, /*kPerColumn=*/false>(x, shape, row_stats, kOp);
  });
}

void normalize_frobenius(TensorView x, double multiplier, double eps) {
  scale_by_frobenius_factor(x, "normalize_frobenius", [&](float* factor) {
    return NormalizeFactor{factor, multiplier, eps};
  });
}

void rescale_frobenius(TensorView x, double target_norm, double eps) {
  scale_by_frobenius_factor(x, "rescale_frobenius", [&](float* factor) {
    return RescaleFactor{factor, target_norm, eps};
  });
}

void normuon_variance_reduce(TensorView g, TensorView second_moment, double beta2) {
  constexpr const char* kOp = "normuon_variance_reduce";
  check_tensor(second_moment, DType::kF32, kOp, "second_moment");
  with_element_type(g, kOp, "g", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const MatrixShape shape = matrix_shape(g, kOp, "g");
    // The CPU op's rule: (rows, 1) or (rows) holds per-row statistics, anything else with cols elements
    // per-column ones.
    const bool per_row =
        second_moment.numel() == shape.rows && (second_moment.rank < 2 || second_moment.dim(-1) == 1);
    NANOFORGE_CHECK(per_row || second_moment.numel() == shape.cols,
                    "normuon_variance_reduce on CUDA: second moment {} fits neither ({}, 1) nor (1, {})",
                    second_moment.describe(), shape.rows, shape.cols);
    if (g.numel() == 0) return;
    const int64_t groups = per_row ? shape.rows : shape.cols;
    const int64_t reduced = per_row ? shape.cols : shape.rows;
    auto* group_stats = static_cast<float*>(device_scratch(groups * int64_t{sizeof(float)}));
    if (per_row) {
      row_squares<T>(g, shape, group_stats, kOp);
    } else {
      const dim3 block(kWarpSize, kColumnSlices);
      const auto column_blocks = static_cast<int>((int64_t{shape.cols} + kWarpSize - 1) / kWarpSize);
      launch_kernel<column_squares_kernel<T>>(column_blocks, block)(group_stats, g.as<T>(), shape.rows,
                                                                    shape.cols);
      NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
    }
    launch_kernel<normuon_multipliers_kernel>(1, kFoldThreads)(group_stats, second_moment.as<float>(), groups,
                                                               reduced, static_cast<float>(1.0 - beta2));
    NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
    if (per_row) {
      scale_rows<T, /*kPerColumn=*/false>(g, shape, group_stats, kOp);
    } else {
      scale_rows<T, /*kPerColumn=*/true>(g, shape, group_stats, kOp);
    }
  });
}

void cautious_weight_decay_step(TensorView param, TensorView update, double lr, double weight_decay) {
  constexpr const char* kOp = "cautious_weight_decay_step";
  check_tensor(param, DType::kF32, kOp, "param");
  check_same_shape(param, update, kOp);
  with_element_type(update, kOp, "update", [&](auto tag) {
    using U = typename decltype(tag)::type;
    const int64_t numel = param.numel();
    if (numel == 0) return;
    const bool packed = aligned_to(param.data, sizeof(float) * kMixedCount) &&
                        aligned_to(update.data, sizeof(U) * kMixedCount);
    const auto rate = static_cast<float>(lr), decay = static_cast<float>(lr * weight_decay);
    with_pack_of<kMixedCount>(packed, [&](auto count) {
      constexpr int kCount = decltype(count)::value;
      launch_kernel<cautious_weight_decay_kernel<U, kCount>>(
          elementwise_blocks(numel, kCount), kElementwiseThreads)(param.as<float>(), update.as<U>(), numel,
                                                                  rate, decay);
    });
    NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
  });
}

double squared_norm(TensorView x) {
  constexpr const char* kOp = "squared_norm";
  double total = 0;
  with_element_type(x, kOp, "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (x.numel() == 0) return;
    const SquaresLaunch launch = plan_squares<T>(x);
    auto* device_total = reinterpret_cast<double*>(launch.scratch);
    sum_of_squares<T>(x, launch, StoreTotal{device_total}, kOp);
    auto* host_total = static_cast<double*>(host_scratch(sizeof(double)));
    NANOFORGE_CUDA_CHECK(cudaMemcpyAsync(host_total, device_total, sizeof(double), cudaMemcpyDeviceToHost,
                                         /*stream=*/nullptr));
    NANOFORGE_CUDA_CHECK(cudaStreamSynchronize(/*stream=*/nullptr));
    total = *host_total;
  });
  return total;
}

void add_squared_norm(TensorView total, TensorView x) {
  constexpr const char* kOp = "add_squared_norm";
  check_tensor(total, DType::kF64, kOp, "total");
  with_element_type(x, kOp, "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (x.numel() == 0) return;
    const SquaresLaunch launch = plan_squares<T>(x);
    sum_of_squares<T>(x, launch, AddToTotal{total.as<double>()}, kOp);
  });
}

}  // namespace nanoforge::cuda
