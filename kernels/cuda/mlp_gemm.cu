// The MLP's two GEMMs with nanochat's ReLU² folded into them: a tensor-core GEMM of our own (cuBLASLt has no
// epilogue that squares or multiplies by 2 relu(x)), for the GPUs where the separate ReLU² passes cost about
// as much as the GEMMs' FLOPs (the GB10). Only act is stored: the backward's 2 relu(pre) is 2 sqrt(act).
//   linear_relu_squared_forward   act = relu(x w^T)²             x (N, K), w (M, K): both rows K-contiguous
//   relu_squared_linear_backward  d_pre = (d_y w) ⊙ 2 sqrt(act)  d_y (N, K), w (K, M): w's rows M-contiguous
// 128 x 128 output tiles of mma.sync m16n8k16 through a 3-stage cp.async ring (mma_tiles.cuh), fp32
// accumulation, one bf16 rounding; K and M multiples of 8. The FP8 variants run the same tiles as m16n8k32 on
// FP8 codes. Tiling, the FP8 epilogue and where it pays: docs/kernels.md, "The MLP GEMM".
#include "kernels/cuda/amax.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_tiles.cuh"

namespace nanoforge::cuda {
namespace {

using namespace tiles;

constexpr int kBlockRows = 128;     // output rows (x's) per block
constexpr int kBlockColumns = 128;  // output columns (w's output features) per block
constexpr int kDepthTile = 32;      // k per pipeline stage
constexpr int kStages = 3;
constexpr int kWarpGridRows = 2, kWarpGridColumns = 4;
constexpr int kThreads = kWarpGridRows * kWarpGridColumns * kWarpSize;
constexpr int kRowBlocks = kBlockRows / kWarpGridRows / kMmaRows;              // 4 m16 blocks a warp
constexpr int kColumnBlocks = kBlockColumns / kWarpGridColumns / kMmaColumns;  // 4 n8 blocks a warp
// An A tile (128 x 32); a B tile (32 x 128 or 128 x 32) has as many.
constexpr int kTileElements = kBlockRows * kDepthTile;
constexpr int kStageElements = 2 * kTileElements;
constexpr int kSharedBytes = kStages * kStageElements * 2;
static_assert(kBlockColumns * kDepthTile == kTileElements, "A and B tiles are the same size");
static_assert(kSharedBytes <= kMaxSharedBytes, "the ring exceeds the shared memory of one GB10 block");

// How w is laid out: (M, K), each output column's weights contiguous (the forward's x w^T), or (K, M), each
// k's row of outputs contiguous (the backward's d_y w).
enum class WeightLayout { kOutputRows, kDepthRows };
// What the epilogue writes: relu(acc)², or acc · 2 sqrt(act) with act read at the same place.
enum class Epilogue { kReluSquared, kReluSquaredGradient };
// What a and b hold: bf16 values, or FP8 codes with inverse scales (b e4m3; a e4m3, or e5m2 for the
// backward's output gradient).
enum class Operands { kBf16, kFp8, kFp8E5m2A };

// Block-wide: cp.async copies of a (kTileRows, kTileColumns) tile of a row-major (rows, columns) matrix from
// (row0, column0) into a swizzled tile; what lies past `rows` or `columns` is zero-filled (from the matrix's
// first, valid address). A's and the forward's B tiles are (128, 32), the backward's B tile (32, 128).
template <int kTileRows, int kTileColumns>
__device__ inline void load_tile(BF16* tile, const BF16* matrix, int rows, int columns, int row0,
                                 int column0) {
  constexpr int kChunks = kTileColumns / kChunkElements;
  static_assert(kTileRows * kChunks % kThreads == 0, "every thread issues the same number of copies");
#pragma unroll
  for (int i = 0; i < kTileRows * kChunks / kThreads; ++i) {
    const int index = static_cast<int>(threadIdx.x) + i * kThreads;
    const int row = index / kChunks, chunk = index % kChunks;
    const int column = column0 + chunk * kChunkElements;
    const bool inside = row0 + row < rows && column < columns;
    const int64_t offset = inside ? static_cast<int64_t>(row0 + row) * columns + column : 0;
    ptx::cp_async_16(tile + swizzled<kTileColumns>(row, chunk), matrix + offset, inside);
  }
}

template <Epilogue kEpilogue>
__device__ inline float epilogue(float acc, float act) {
  if constexpr (kEpilogue == Epilogue::kReluSquared) {
    const float r = acc > 0.0f ? acc : 0.0f;  // as the CPU's relu: NaN gives 0
    return r * r;
  } else {
    return acc * (2.0f * sqrtf(act));
  }
}

// FP8 operands of an MLP GEMM: the inverse scales of a and b (device scalars), and the word that receives
// the amax of what the forward writes (null: none wanted).
struct Fp8Operands {
  const float* a_inv_scale = nullptr;
  const float* b_inv_scale = nullptr;
  unsigned* amax_bits = nullptr;
};

// out (rows, columns) bf16 = epilogue(a b), a (rows, depth) bf16, b as kLayout says; act (rows, columns)
// bf16 for the gradient epilogue (null otherwise). Grid (column tiles, row tiles). With FP8 operands, a and b
// are codes read as 16-bit units and depth counts units (codes / 2).
template <WeightLayout kLayout, Epilogue kEpilogue, Operands kOperands>
__global__ void __launch_bounds__(kThreads)
    mlp_gemm_kernel(BF16* out, const BF16* a, const BF16* b, const BF16* act, int rows, int columns,
                    int depth, Fp8Operands fp8) {
  constexpr bool kFp8 = kOperands != Operands::kBf16;
  static_assert(!kFp8 || kLayout == WeightLayout::kOutputRows, "FP8 operands are K-major");
  NANOFORGE_DYNAMIC_SHARED(unsigned char, shared, 128);
  BF16* ring = reinterpret_cast<BF16*>(shared);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int row0 = static_cast<int>(blockIdx.y) * kBlockRows;
  const int column0 = static_cast<int>(blockIdx.x) * kBlockColumns;
  const int warp_row0 = warp / kWarpGridColumns * kRowBlocks * kMmaRows;
  const int warp_column0 = warp % kWarpGridColumns * kColumnBlocks * kMmaColumns;
  const int depth_tiles = (depth + kDepthTile - 1) / kDepthTile;

  auto load_stage = [&](int tile_index) {
    BF16* a_tile = ring + tile_index % kStages * kStageElements;
    BF16* b_tile = a_tile + kTileElements;
    const int k0 = tile_index * kDepthTile;
    load_tile<kBlockRows, kDepthTile>(a_tile, a, rows, depth, row0, k0);
    if constexpr (kLayout == WeightLayout::kOutputRows) {
      load_tile<kBlockColumns, kDepthTile>(b_tile, b, columns, depth, column0, k0);
    } else {
      load_tile<kDepthTile, kBlockColumns>(b_tile, b, depth, columns, k0, column0);
    }
  };

  float acc[kRowBlocks][kColumnBlocks][4];
  zero(acc);
  // The ring: tiles 0 .. kStages - 2 in flight before the first product; each iteration then waits for its
  // tile, refills the slot the previous iteration used, and multiplies. Every iteration commits one group
  // (possibly empty), so "at most kStages - 2 pending" always means "this iteration's tile has landed".
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < depth_tiles) load_stage(stage);
    ptx::cp_async_commit_group();
  }
#pragma unroll 1
  for (int tile_index = 0; tile_index < depth_tiles; ++tile_index) {
    ptx::cp_async_wait_group<kStages - 2>();
    __syncthreads();  // the tile is visible to every warp, and every warp is done with the slot refilled next
    if (tile_index + kStages - 1 < depth_tiles) load_stage(tile_index + kStages - 1);
    ptx::cp_async_commit_group();
    const BF16* a_tile = ring + tile_index % kStages * kStageElements;
    const BF16* b_tile = a_tile + kTileElements;
#pragma unroll
    for (int k = 0; k < kDepthTile; k += kMmaDepth) {
      uint32_t a_fragments[kRowBlocks][4];
#pragma unroll
      for (int m = 0; m < kRowBlocks; ++m)
        load_a<kDepthTile>(a_fragments[m], a_tile, warp_row0 + m * kMmaRows, k);
#pragma unroll
      for (int n = 0; n < kColumnBlocks; n += 2) {
        uint32_t b_fragments[4];
        if constexpr (kLayout == WeightLayout::kOutputRows) {
          load_b_from_rows<kDepthTile>(b_fragments, b_tile, warp_column0 + n * kMmaColumns, k);
        } else {
          load_b_from_columns<kBlockColumns>(b_fragments, b_tile, k, warp_column0 + n * kMmaColumns);
        }
#pragma unroll
        for (int m = 0; m < kRowBlocks; ++m) {
          if constexpr (kFp8) {
            constexpr bool kAIsE5m2 = kOperands == Operands::kFp8E5m2A;
            mma_fp8<kAIsE5m2>(acc[m][n], a_fragments[m], b_fragments[0], b_fragments[1]);
            mma_fp8<kAIsE5m2>(acc[m][n + 1], a_fragments[m], b_fragments[2], b_fragments[3]);
          } else {
            mma(acc[m][n], a_fragments[m], b_fragments[0], b_fragments[1]);
            mma(acc[m][n + 1], a_fragments[m], b_fragments[2], b_fragments[3]);
          }
        }
      }
    }
  }
  ptx::cp_async_wait_group<0>();

  // FP8: the GEMM's output as the unfused path stores it, acc times both inverse scales rounded to bf16.
  float scale = 1.0f;
  if constexpr (kFp8) scale = *fp8.a_inv_scale * *fp8.b_inv_scale;
  auto gemm_output = [&](float value) {
    if constexpr (kFp8) return __bfloat162float(__float2bfloat16_rn(value * scale));
    return value;
  };
  unsigned local_amax = 0;
  // Lane 4g + t holds rows g and g + 8, columns 2t and 2t + 1 of each m16n8 block: one bf16 pair a row.
#pragma unroll
  for (int m = 0; m < kRowBlocks; ++m) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + warp_row0 + m * kMmaRows + lane / 4 + half * 8;
      if (row >= rows) continue;
#pragma unroll
      for (int n = 0; n < kColumnBlocks; ++n) {
        const int column = column0 + warp_column0 + n * kMmaColumns + 2 * (lane % 4);
        if (column >= columns) continue;  // columns is a multiple of 8: column + 1 is inside too
        const int64_t at = static_cast<int64_t>(row) * columns + column;
        float2 factor{0.0f, 0.0f};
        if constexpr (kEpilogue == Epilogue::kReluSquaredGradient) {
          factor = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(act + at));
        }
        const __nv_bfloat162 pair =
            __floats2bfloat162_rn(epilogue<kEpilogue>(gemm_output(acc[m][n][2 * half]), factor.x),
                                  epilogue<kEpilogue>(gemm_output(acc[m][n][2 * half + 1]), factor.y));
        *reinterpret_cast<__nv_bfloat162*>(out + at) = pair;
        if constexpr (kFp8) {
          local_amax = max(local_amax, max(abs_bits(__low2float(pair)), abs_bits(__high2float(pair))));
        }
      }
    }
  }
  if constexpr (kFp8) warp_raise_amax(fp8.amax_bits, local_amax);
}

// The checks of the ops: rank-2 operands on the GPU, out bf16, a and w of `a_dtype` and `w_dtype` (bf16, or
// FP8 codes), whose shapes chain (w (M, K) or (K, M) as `layout` says), 16-byte aligned, K and M whole
// 16-byte chunks of their dtype (M in bf16 outputs), sizes that fit the kernel's int indices and grid.
void check_gemm(const TensorView& out, const TensorView& a, const TensorView& w, WeightLayout layout,
                const char* op, const char* out_name, const char* a_name, DType a_dtype, DType w_dtype) {
  check_tensor(out, DType::kBF16, op, out_name);
  check_tensor(a, a_dtype, op, a_name);
  check_tensor(w, w_dtype, op, "w");
  check_rank(out, 2, op, out_name);
  check_rank(a, 2, op, a_name);
  check_rank(w, 2, op, "w");
  const int64_t rows = out.shape[0], columns = out.shape[1], depth = a.shape[1];
  const bool output_rows = layout == WeightLayout::kOutputRows;
  NANOFORGE_CHECK(a.shape[0] == rows && w.shape[0] == (output_rows ? columns : depth) &&
                      w.shape[1] == (output_rows ? depth : columns),
                  "{} on CUDA: shapes do not chain: {} {}, w {}, {} {}", op, a_name, a.describe(),
                  w.describe(), out_name, out.describe());
  const int64_t depth_chunk = 16 / dtype_bytes(a_dtype);
  NANOFORGE_CHECK(
      depth % depth_chunk == 0 && columns % kChunkElements == 0,
      "{} on CUDA: the MLP GEMM loads 16-byte chunks; K = {} must be a multiple of {} and M = {} of "
      "8 (model.mlp_gemm = cublaslt takes any size)",
      op, depth, depth_chunk, columns);
  NANOFORGE_CHECK(
      rows <= int64_t{65535} * kBlockRows && columns < (int64_t{1} << 30) && depth < (int64_t{1} << 30),
      "{} on CUDA: {} {} is too large for one launch", op, out_name, out.describe());
  for (const TensorView* t : {&out, &a, &w}) {
    NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(t->data) % 16 == 0,
                    "{} on CUDA: every operand must start on a 16-byte boundary, got {}", op, t->describe());
  }
}

// The gradient epilogue's act: bf16 of out's shape, read in bf16 pairs, aliasing neither out nor a.
void check_act(const TensorView& act, const TensorView& d_pre, const TensorView& d_y, const char* op) {
  check_tensor(act, DType::kBF16, op, "act");
  check_same_shape(act, d_pre, op);
  NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(act.data) % 4 == 0,
                  "{} on CUDA: act must start on a 4-byte boundary (read as bf16 pairs), got {}", op,
                  act.describe());
  NANOFORGE_CHECK(d_pre.data != d_y.data && d_pre.data != act.data,
                  "{} on CUDA: d_pre must alias neither d_y nor act", op);
}

// FP8 operands' inverse scales: one f32 each on the GPU.
void check_inverse_scales(const TensorView& a_inv_scale, const TensorView& w_inv_scale, const char* op) {
  for (const TensorView* scale : {&a_inv_scale, &w_inv_scale}) {
    check_tensor(*scale, DType::kF32, op, scale == &a_inv_scale ? "a_inv_scale" : "w_inv_scale");
    NANOFORGE_CHECK(scale->numel() == 1, "{} on CUDA: inverse scale {} must be one f32", op,
                    scale->describe());
  }
}

template <WeightLayout kLayout, Epilogue kEpilogue, Operands kOperands>
void launch_mlp_gemm(TensorView out, TensorView a, TensorView b, const BF16* act, Fp8Operands fp8) {
  const int rows = static_cast<int>(out.shape[0]), columns = static_cast<int>(out.shape[1]);
  // FP8 codes move as 16-bit units: depth in units.
  const int depth = static_cast<int>(a.shape[1] * dtype_bytes(a.dtype) / 2);
  if (static_cast<int64_t>(rows) * columns == 0) return;
  const dim3 grid((columns + kBlockColumns - 1) / kBlockColumns, (rows + kBlockRows - 1) / kBlockRows);
  allow_shared_bytes(mlp_gemm_kernel<kLayout, kEpilogue, kOperands>, kSharedBytes);
  launch_kernel<mlp_gemm_kernel<kLayout, kEpilogue, kOperands>>(grid, kThreads, kSharedBytes)(
      out.as<BF16>(), static_cast<const BF16*>(a.data), static_cast<const BF16*>(b.data), act, rows, columns,
      depth, fp8);
}

}  // namespace

void linear_relu_squared_forward(TensorView act, TensorView x, TensorView w,
                                 const ops::KernelSettings& /*settings*/) {
  constexpr const char* kOp = "linear_relu_squared_forward";
  check_gemm(act, x, w, WeightLayout::kOutputRows, kOp, "act", "x", DType::kBF16, DType::kBF16);
  NANOFORGE_CHECK(act.data != x.data, "{} on CUDA: act must not alias x", kOp);
  launch_mlp_gemm<WeightLayout::kOutputRows, Epilogue::kReluSquared, Operands::kBf16>(act, x, w, nullptr, {});
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView w, TensorView act,
                                  const ops::KernelSettings& /*settings*/) {
  constexpr const char* kOp = "relu_squared_linear_backward";
  check_gemm(d_pre, d_y, w, WeightLayout::kDepthRows, kOp, "d_pre", "d_y", DType::kBF16, DType::kBF16);
  check_act(act, d_pre, d_y, kOp);
  launch_mlp_gemm<WeightLayout::kDepthRows, Epilogue::kReluSquaredGradient, Operands::kBf16>(
      d_pre, d_y, w, act.as<BF16>(), {});
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void fp8_linear_relu_squared_forward(TensorView act, ops::AmaxOutput amax, TensorView x,
                                     TensorView x_inv_scale, TensorView w, TensorView w_inv_scale,
                                     const ops::KernelSettings& /*settings*/) {
  constexpr const char* kOp = "fp8_linear_relu_squared_forward";
  check_gemm(act, x, w, WeightLayout::kOutputRows, kOp, "act", "x", DType::kF8E4M3, DType::kF8E4M3);
  check_inverse_scales(x_inv_scale, w_inv_scale, kOp);
  const Fp8Operands fp8{x_inv_scale.as<float>(), w_inv_scale.as<float>(), amax_word(amax, kOp)};
  launch_mlp_gemm<WeightLayout::kOutputRows, Epilogue::kReluSquared, Operands::kFp8>(act, x, w, nullptr, fp8);
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

void fp8_relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView d_y_inv_scale,
                                      TensorView w, TensorView w_inv_scale, TensorView act,
                                      const ops::KernelSettings& /*settings*/) {
  constexpr const char* kOp = "fp8_relu_squared_linear_backward";
  check_gemm(d_pre, d_y, w, WeightLayout::kOutputRows, kOp, "d_pre", "d_y", DType::kF8E5M2, DType::kF8E4M3);
  check_act(act, d_pre, d_y, kOp);
  check_inverse_scales(d_y_inv_scale, w_inv_scale, kOp);
  const Fp8Operands fp8{d_y_inv_scale.as<float>(), w_inv_scale.as<float>(), nullptr};
  launch_mlp_gemm<WeightLayout::kOutputRows, Epilogue::kReluSquaredGradient, Operands::kFp8E5m2A>(
      d_pre, d_y, w, act.as<BF16>(), fp8);
  NANOFORGE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace nanoforge::cuda
