// FP8 quantisation on the GPU (nanochat's fp8.py _to_fp8, tensorwise) and copy_columns. Two passes: the
// absolute maximum of the column block (amax.cuh; skipped when the amax is given: the kernel that produced x
// took it, or an earlier quantisation of the same block), then one pass that derives the scale from it in
// float64, as fp8.py does, and
// writes the codes through a shared-memory tile, in x's layout and/or transposed (the K-major operands of
// the weight-gradient GEMM), so transposing costs no second pass. The codes are cuda_fp8.h's conversion with
// saturation: round to nearest even, +-max for overflow, NaN kept (fp8.py's clamp, then the cast).
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/amax.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reductions.cuh"
#include "kernels/cuda/vector_pack.cuh"
#include "kernels/fp8_format.h"

namespace nanoforge::cuda {
namespace {

constexpr int kTile = 32;            // a 32 x 32 tile of x per block in the quantise pass
constexpr int kTileRowsPerPass = 8;  // 32 x 8 threads, each handling 4 rows of the tile
constexpr int kAmaxThreads = 256;

// amax_bits = max over the block's elements of the bits of |x[r, first + c]|, r < rows, c < cols.
template <class T>
__global__ void amax_kernel(const T* x, int64_t rows, int64_t row_stride, int64_t first, int64_t cols,
                            unsigned* amax_bits) {
  __shared__ unsigned warp_max[kAmaxThreads / kWarpSize];
  unsigned local = 0;
  const int64_t total = rows * cols;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t r = i / cols, c = i % cols;
    local = max(local, abs_bits(to_float(x[r * row_stride + first + c])));
  }
  local = warp_max_bits(local);
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize,
            warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (lane == 0) warp_max[warp] = local;
  __syncthreads();
  if (warp == 0) {
    local = lane < kAmaxThreads / kWarpSize ? warp_max[lane] : 0u;
    local = warp_max_bits(local);
    if (lane == 0) raise_amax(amax_bits, local);
  }
}

// fp8.py's scale from the block's amax: fp8_max / max(amax, 1e-12) in float64, then float32. A NaN amax gives
// a NaN scale (torch's clamp keeps NaN), so every code is NaN.
__device__ inline float tensorwise_scale(unsigned amax_bits, float fp8_max) {
  const double amax = static_cast<double>(__uint_as_float(amax_bits));
  const double floored = amax < fp8::kAmaxFloor ? fp8::kAmaxFloor : amax;
  return static_cast<float>(static_cast<double>(fp8_max) / floored);
}

// q (rows, cols) and/or q_t (cols, rows), either may be null: the codes of x's block scaled by the scale of
// amax_bits. Block (kTile, kTileRowsPerPass) quantises one 32 x 32 tile; block (0, 0) writes inv_scale.
template <class T>
__global__ void quantize_kernel(uint8_t* q, uint8_t* q_t, float* inv_scale, const T* x, int64_t rows,
                                int64_t row_stride, int64_t first, int64_t cols, const unsigned* amax_bits,
                                float fp8_max, __nv_fp8_interpretation_t format) {
  __shared__ uint8_t tile[kTile][kTile + 4];  // + 4: the transposed reads fall in different banks
  const float scale = tensorwise_scale(*amax_bits, fp8_max);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *inv_scale = 1.0f / scale;
  const int64_t tile_col = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t tile_row = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tx = static_cast<int>(threadIdx.x);
  for (int ty = static_cast<int>(threadIdx.y); ty < kTile; ty += kTileRowsPerPass) {
    const int64_t r = tile_row + ty, c = tile_col + tx;
    if (r < rows && c < cols) {
      const float value = to_float(x[r * row_stride + first + c]) * scale;
      const uint8_t code = __nv_cvt_float_to_fp8(value, __NV_SATFINITE, format);
      if (q != nullptr) q[r * cols + c] = code;
      tile[ty][tx] = code;
    }
  }
  if (q_t == nullptr) return;
  __syncthreads();
  for (int ty = static_cast<int>(threadIdx.y); ty < kTile; ty += kTileRowsPerPass) {
    const int64_t c = tile_col + ty, r = tile_row + tx;  // q_t[c, r] = tile[r - tile_row][c - tile_col]
    if (r < rows && c < cols) q_t[c * rows + r] = tile[tx][ty];
  }
}

// dst[r, dst_first + c] = src[r, src_first + c] for every row r and c < columns.
template <class T>
__global__ void copy_columns_kernel(T* dst, int64_t dst_stride, int64_t dst_first, const T* src,
                                    int64_t src_stride, int64_t src_first, int64_t rows, int64_t columns) {
  const int64_t total = rows * columns;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t r = i / columns, c = i % columns;
    dst[r * dst_stride + dst_first + c] = src[r * src_stride + src_first + c];
  }
}

int grid_for(int64_t elements, int threads) {
  return static_cast<int>(std::clamp<int64_t>((elements + threads - 1) / threads, 1, 4096));
}

template <class T>
void launch_quantize(TensorView q, TensorView q_t, TensorView inv_scale, TensorView amax, ops::Fp8Amax source,
                     TensorView x, int64_t first, int64_t cols, DType format) {
  const int64_t rows = x.shape[0];
  auto* amax_bits = static_cast<unsigned*>(amax.data);
  if (source == ops::Fp8Amax::kCompute) {
    NANOFORGE_CUDA_CHECK(cudaMemsetAsync(amax_bits, 0, sizeof(unsigned), nullptr));
    launch_kernel<amax_kernel<T>>(grid_for(rows * cols, kAmaxThreads), kAmaxThreads)(
        x.as<T>(), rows, x.shape[1], first, cols, amax_bits);
    NANOFORGE_CUDA_CHECK_LAUNCH("fp8_quantize (amax)");
  }
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>((rows + kTile - 1) / kTile));
  launch_kernel<quantize_kernel<T>>(grid, dim3(kTile, kTileRowsPerPass))(
      static_cast<uint8_t*>(q.data), static_cast<uint8_t*>(q_t.data), inv_scale.as<float>(), x.as<T>(), rows,
      x.shape[1], first, cols, amax_bits, fp8::traits(fp8::format_of(format)).max_finite,
      format == DType::kF8E4M3 ? __NV_E4M3 : __NV_E5M2);
  NANOFORGE_CUDA_CHECK_LAUNCH("fp8_quantize");
}

}  // namespace

// kernels/ops.cpp checked the shapes and the scalars.
void fp8_quantize(TensorView q, TensorView q_transposed, TensorView inv_scale, TensorView amax,
                  ops::Fp8Amax amax_source, TensorView x, int64_t first_column) {
  const bool has_q = q.data != nullptr;
  const DType format = has_q ? q.dtype : q_transposed.dtype;
  const int64_t rows = x.shape[0], cols = has_q ? q.shape[1] : q_transposed.shape[0];
  if (rows == 0 || cols == 0) return;
  if (x.dtype == DType::kF32) {
    launch_quantize<float>(q, q_transposed, inv_scale, amax, amax_source, x, first_column, cols, format);
  } else {
    check_tensor(x, DType::kBF16, "fp8_quantize", "x");
    launch_quantize<__nv_bfloat16>(q, q_transposed, inv_scale, amax, amax_source, x, first_column, cols,
                                   format);
  }
}

void copy_columns(TensorView dst, int64_t dst_first_column, TensorView src, int64_t src_first_column,
                  int64_t columns) {
  check_rank(dst, 2, "copy_columns", "dst");
  check_rank(src, 2, "copy_columns", "src");
  NANOFORGE_CHECK(dst.dtype == src.dtype && dst.shape[0] == src.shape[0] && columns >= 0 &&
                      dst_first_column >= 0 && src_first_column >= 0 &&
                      dst_first_column + columns <= dst.shape[1] &&
                      src_first_column + columns <= src.shape[1],
                  "copy_columns: {} columns from {} at {} into {} at {}", columns, src.describe(),
                  src_first_column, dst.describe(), dst_first_column);
  const int64_t rows = dst.shape[0];
  if (rows == 0 || columns == 0) return;
  constexpr int kThreads = 256;
  if (dst.dtype == DType::kF32) {
    launch_kernel<copy_columns_kernel<float>>(grid_for(rows * columns, kThreads), kThreads)(
        dst.as<float>(), dst.shape[1], dst_first_column, src.as<float>(), src.shape[1], src_first_column,
        rows, columns);
  } else {
    check_tensor(dst, DType::kBF16, "copy_columns", "dst");
    launch_kernel<copy_columns_kernel<__nv_bfloat16>>(grid_for(rows * columns, kThreads), kThreads)(
        dst.as<__nv_bfloat16>(), dst.shape[1], dst_first_column, src.as<__nv_bfloat16>(), src.shape[1],
        src_first_column, rows, columns);
  }
  NANOFORGE_CUDA_CHECK_LAUNCH("copy_columns");
}

}  // namespace nanoforge::cuda
