// matmul on the GPU through cuBLASLt: bf16 a and b, fp32 accumulation, out bf16 (activations) or f32 (weight
// gradients, accumulated with beta = 1); fp8_matmul is the same GEMM on FP8 codes, both operands K-major.
// Row-major to column-major: cuBLASLt sees a row-major (R, C) matrix as its column-major transpose (C, R),
// so the row-major out = op(a) op(b) is computed as the column-major out^T = op(b)^T op(a)^T: b is
// cuBLASLt's A and a its B, each keeping its own transpose flag. One handle and workspace, and every distinct
// GEMM's descriptors and heuristic algorithm made once, so a step runs no heuristic queries; determinism and
// why there is no fused epilogue: docs/kernels.md, "matmul".
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector_pack.cuh"

// NANOFORGE_CUBLAS_CHECK(cublasLtMatmul(...)): aborts with the call and cuBLAS's name and description of
// the status.
#define NANOFORGE_CUBLAS_CHECK(call)                                                               \
  do {                                                                                             \
    const cublasStatus_t nanoforge_cublas_status = (call);                                         \
    NANOFORGE_CHECK(nanoforge_cublas_status == CUBLAS_STATUS_SUCCESS, "{} failed: {} ({})", #call, \
                    cublasLtGetStatusString(nanoforge_cublas_status),                              \
                    cublasLtGetStatusName(nanoforge_cublas_status));                               \
  } while (false)

namespace nanoforge::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// cuBLASLt's largest alignment preference: operands aligned to this much admit every algorithm.
constexpr uint32_t kMaxAlignmentBytes = 256;

// What selects a GEMM's descriptors and algorithm. m, n, k are the row-major problem's: out (m, n), K = k.
struct GemmKey {
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  DType out_dtype = DType::kBF16;
  uint32_t align_a = 0, align_b = 0, align_out = 0;      // bytes, powers of two up to kMaxAlignmentBytes
  DType a_dtype = DType::kBF16, b_dtype = DType::kBF16;  // FP8 codes for fp8_matmul
  int64_t out_stride = 0;                                // out's row stride, >= n (a block of columns)
  bool fast_accumulation = false;                        // FP8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM

  auto tied() const {
    return std::tie(m, n, k, transpose_a, transpose_b, out_dtype, align_a, align_b, align_out, a_dtype,
                    b_dtype, out_stride, fast_accumulation);
  }
  bool operator<(const GemmKey& other) const { return tied() < other.tied(); }
};

// A GEMM ready to launch: cuBLASLt's A is the row-major b, its B the row-major a, C and D are out.
struct GemmPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t layout_b = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr;
  cublasLtMatrixLayout_t layout_out = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
};

// The process-wide cuBLASLt state. Never destroyed: queued GEMMs may still use the workspace at exit.
struct CublasLt {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  int device = -1;  // the device the workspace lives on
  std::map<GemmKey, GemmPlan> plans;
};

CublasLt& cublas_lt() {
  static CublasLt* instance = new CublasLt();
  return *instance;
}

// The largest power of two, up to kMaxAlignmentBytes, that divides the address.
uint32_t alignment_bytes(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = kMaxAlignmentBytes;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::kF8E5M2:
      return CUDA_R_8F_E5M2;
    default:
      return CUDA_R_16BF;
  }
}

// A column-major (rows, cols) layout with leading dimension ld (rows unless a block of a wider matrix): a
// row-major (cols, rows) matrix.
cublasLtMatrixLayout_t column_major_layout(DType dtype, int64_t rows, int64_t cols, int64_t ld = 0) {
  cublasLtMatrixLayout_t layout = nullptr;
  NANOFORGE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, cuda_data_type(dtype),
                                                    static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                                    ld > 0 ? ld : rows));
  return layout;
}

void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                    uint32_t value) {
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
}

// Builds the descriptors of `key` and asks cuBLASLt's heuristic for its best algorithm.
GemmPlan make_plan(cublasLtHandle_t handle, const GemmKey& key) {
  GemmPlan plan;
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt's A is b: op(b)^T is b's column-major view, transposed when op(b) is b^T; likewise B is a.
  const cublasOperation_t operation_b = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t operation_a = key.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                                        &operation_b, sizeof(operation_b)));
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB,
                                                        &operation_a, sizeof(operation_a)));
  // Row-major b is (K, N), or (N, K) when transposed; a is (M, K), or (K, M); out is (M, N).
  const int64_t b_rows = key.transpose_b ? key.n : key.k, b_cols = key.transpose_b ? key.k : key.n;
  const int64_t a_rows = key.transpose_a ? key.k : key.m, a_cols = key.transpose_a ? key.m : key.k;
  plan.layout_b = column_major_layout(key.b_dtype, b_cols, b_rows);
  plan.layout_a = column_major_layout(key.a_dtype, a_cols, a_rows);
  plan.layout_out = column_major_layout(key.out_dtype, key.n, key.m, key.out_stride);
  if (key.fast_accumulation) {
    const int8_t fast = 1;
    NANOFORGE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  }

  cublasLtMatmulPreference_t preference = nullptr;
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  // The default assumes 256-byte aligned operands; views into the middle of a buffer may be less aligned.
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out);
  // Split-K partial sums stay fp32: the INPLACE and OUTPUT_TYPE schemes would add them in bf16 for a bf16
  // out (what torch calls a reduced-precision reduction). For an f32 out every scheme adds in fp32.
  if (key.out_dtype == DType::kBF16) {
    set_preference(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                   CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // No algorithm at all is CUBLAS_STATUS_NOT_SUPPORTED (with found = 0), reported below with the GEMM's shape
  // and alignments rather than as a bare cuBLAS error.
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, plan.operation, plan.layout_b, plan.layout_a, plan.layout_out,
                                     plan.layout_out, preference, 1, &result, &found);
  NANOFORGE_CHECK(status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmulAlgoGetHeuristic failed: {} ({})", cublasLtGetStatusString(status),
                  cublasLtGetStatusName(status));
  if (status != CUBLAS_STATUS_SUCCESS) found = 0;
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
  NANOFORGE_CHECK(
      found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
      "matmul on CUDA: cuBLASLt has no algorithm for out ({}, {}) {} = a{} {} @ b{} {} with K = {} and "
      "operand alignments a {} B, b {} B, out {} B; align the views to 16 bytes",
      key.m, key.n, dtype_name(key.out_dtype), key.transpose_a ? "^T" : "", dtype_name(key.a_dtype),
      key.transpose_b ? "^T" : "", dtype_name(key.b_dtype), key.k, key.align_a, key.align_b, key.align_out);
  plan.algorithm = result.algo;
  return plan;
}

// The plan for `key`, creating the handle, the workspace and the plan on first use.
GemmPlan plan_for(const GemmKey& key, cublasLtHandle_t* handle, void** workspace) {
  CublasLt& lt = cublas_lt();
  int device = -1;
  NANOFORGE_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(lt.mutex);
  if (lt.handle == nullptr) {
    NANOFORGE_CUBLAS_CHECK(cublasLtCreate(&lt.handle));
    NANOFORGE_CUDA_CHECK(cudaMalloc(&lt.workspace, kWorkspaceBytes));
    lt.device = device;
  }
  NANOFORGE_CHECK(
      device == lt.device,
      "matmul on CUDA: the cuBLASLt workspace lives on device {} but this call runs on device {}; "
      "a process drives one GPU",
      lt.device, device);
  auto found = lt.plans.find(key);
  if (found == lt.plans.end()) found = lt.plans.emplace(key, make_plan(lt.handle, key)).first;
  *handle = lt.handle;
  *workspace = lt.workspace;
  return found->second;
}

// out (numel) = beta * out, or 0 when beta is 0 (out is not read): the whole GEMM when K = 0.
template <class T>
__global__ void scale_kernel(T* out, int64_t numel, float beta) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride)
    out[i] = beta == 0.0f ? from_float<T>(0.0f) : from_float<T>(beta * to_float(out[i]));
}

void scale_out(TensorView out, float beta) {
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((out.numel() + kThreads - 1) / kThreads, 4096));
  if (out.dtype == DType::kF32) {
    launch_kernel<scale_kernel<float>>(blocks, kThreads)(out.as<float>(), out.numel(), beta);
  } else {
    launch_kernel<scale_kernel<__nv_bfloat16>>(blocks, kThreads)(out.as<__nv_bfloat16>(), out.numel(), beta);
  }
  NANOFORGE_CUDA_CHECK_LAUNCH("matmul (K = 0)");
}

bool overlaps(const TensorView& x, const TensorView& y) {
  const auto* x_begin = static_cast<const char*>(x.data);
  const auto* y_begin = static_cast<const char*>(y.data);
  return x_begin < y_begin + y.bytes() && y_begin < x_begin + x.bytes();
}

}  // namespace

void matmul(TensorView out, TensorView a, ops::Transpose transpose_a, TensorView b,
            ops::Transpose transpose_b, double alpha, double beta) {
  constexpr const char* kOp = "matmul";
  check_tensor(a, DType::kBF16, kOp, "a");
  check_tensor(b, DType::kBF16, kOp, "b");
  check_on_gpu(out, kOp, "out");
  NANOFORGE_CHECK(out.dtype == DType::kBF16 || out.dtype == DType::kF32,
                  "matmul on CUDA: out must be bf16 or f32, got {}", out.describe());
  check_rank(out, 2, kOp, "out");
  check_rank(a, 2, kOp, "a");
  check_rank(b, 2, kOp, "b");
  const bool ta = transpose_a == ops::Transpose::kYes;
  const bool tb = transpose_b == ops::Transpose::kYes;
  const int64_t m = ta ? a.shape[1] : a.shape[0];
  const int64_t k = ta ? a.shape[0] : a.shape[1];
  const int64_t k_b = tb ? b.shape[1] : b.shape[0];
  const int64_t n = tb ? b.shape[0] : b.shape[1];
  NANOFORGE_CHECK(k == k_b && out.shape[0] == m && out.shape[1] == n,
                  "matmul on CUDA: {}{} @ {}{} does not give {}", a.describe(), ta ? "^T" : "", b.describe(),
                  tb ? "^T" : "", out.describe());
  if (m == 0 || n == 0) return;
  NANOFORGE_CHECK(!overlaps(out, a) && !overlaps(out, b), "matmul on CUDA: out {} overlaps an input ({}, {})",
                  out.describe(), a.describe(), b.describe());
  const auto alpha_f32 = static_cast<float>(alpha);
  const auto beta_f32 = static_cast<float>(beta);
  if (k == 0) return scale_out(out, beta_f32);

  const GemmKey key{m,
                    n,
                    k,
                    ta,
                    tb,
                    out.dtype,
                    alignment_bytes(a.data),
                    alignment_bytes(b.data),
                    alignment_bytes(out.data),
                    DType::kBF16,
                    DType::kBF16,
                    n,
                    false};
  NANOFORGE_CHECK(key.align_a >= 2 && key.align_b >= 2 && key.align_out >= dtype_bytes(out.dtype),
                  "matmul on CUDA: operands must be aligned to their element size (a {}, b {}, out {})",
                  a.data, b.data, out.data);
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  const GemmPlan plan = plan_for(key, &handle, &workspace);
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmul(handle, plan.operation, &alpha_f32, b.data, plan.layout_b, a.data,
                                        plan.layout_a, &beta_f32, out.data, plan.layout_out, out.data,
                                        plan.layout_out, &plan.algorithm, workspace, kWorkspaceBytes,
                                        /*stream=*/nullptr));
}

void fp8_matmul(TensorView out, int64_t out_first_column, TensorView a, TensorView a_inv_scale, TensorView b,
                TensorView b_inv_scale, double beta) {
  // kernels/ops.cpp checked the shapes, the scales and that a and b hold FP8 codes; these are cuBLASLt's.
  constexpr const char* kOp = "fp8_matmul";
  check_on_gpu(out, kOp, "out");
  NANOFORGE_CHECK(a.dtype == DType::kF8E4M3 || b.dtype == DType::kF8E4M3,
                  "fp8_matmul on CUDA: e5m2 x e5m2 has no cuBLASLt kernel ({} @ {}^T)", a.describe(),
                  b.describe());
  NANOFORGE_CHECK(out.dtype == DType::kBF16 || out.dtype == DType::kF32,
                  "fp8_matmul on CUDA: out must be bf16 or f32, got {}", out.describe());
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  if (m == 0 || n == 0) return;
  void* out_block = static_cast<char*>(out.data) + out_first_column * dtype_bytes(out.dtype);
  const GemmKey key{m,
                    n,
                    k,
                    false,
                    true,
                    out.dtype,
                    alignment_bytes(a.data),
                    alignment_bytes(b.data),
                    alignment_bytes(out_block),
                    a.dtype,
                    b.dtype,
                    out.shape[1],
                    a.dtype == DType::kF8E4M3 && b.dtype == DType::kF8E4M3};
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  const GemmPlan plan = plan_for(key, &handle, &workspace);
  // cuBLASLt's A is b and its B is a (the row-major to column-major swap above), and so are their scales.
  const void* a_scale = b_inv_scale.data;
  const void* b_scale = a_inv_scale.data;
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                        &a_scale, sizeof(a_scale)));
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                        &b_scale, sizeof(b_scale)));
  const float alpha_f32 = 1.0f, beta_f32 = static_cast<float>(beta);
  NANOFORGE_CUBLAS_CHECK(cublasLtMatmul(handle, plan.operation, &alpha_f32, b.data, plan.layout_b, a.data,
                                        plan.layout_a, &beta_f32, out_block, plan.layout_out, out_block,
                                        plan.layout_out, &plan.algorithm, workspace, kWorkspaceBytes,
                                        /*stream=*/nullptr));
}

}  // namespace nanoforge::cuda
