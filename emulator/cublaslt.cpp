// cuBLASLt on the emulator: each GEMM is computed from what the caller set on its descriptors (column- or
// row-major layouts with their leading dimensions, transposes, data types, alpha and beta, the epilogue), so
// a wrong mapping of row-major tensors onto cuBLASLt's column-major view gives a wrong result here as on a
// GPU. It refuses what cuBLASLt refuses: inconsistent shapes, leading dimensions that let columns overlap,
// unsupported types, an algorithm used for another problem, and operands less aligned than the preference
// promised when the algorithm was chosen. bf16 operands are widened exactly and multiplied with fp32
// accumulation (OpenBLAS's sgemm); the result is rounded to the output type once. FP8 (e4m3/e5m2) A and B
// are decoded with cuda_fp8.h's conversion and multiplied by their scale (CUBLASLT_MATMUL_DESC_A/B_SCALE_
// POINTER, device floats read when the GEMM runs) in fp32 before the same GEMM, under the constraints
// NVIDIA documents for FP8 on sm_89/sm_90 (also required here on sm_12x): A transposed and B not ("TN"),
// not both e5m2, K and the leading dimensions of A and B multiples of 16 bytes, A and B 16-byte aligned,
// tensorwise scales present, a bf16 or f32 D, and a GPU of compute capability 8.9 or newer.
#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "emulator/emulator.h"
#include "emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

constexpr uint64_t kAlgorithmMagic = 0x6E66656D756C6174ull;  // "nfemulat"
constexpr uint32_t kDefaultAlignment = 256;                  // cuBLASLt's default minimum alignments
// The widest load of cuBLASLt's tensor-core kernels: an algorithm never needs more alignment than this.
constexpr uint32_t kVectorBytes = 16;

struct Handle {
  int device = 0;
};

struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;         // -1: the type of D
  const void* a_scale = nullptr;  // FP8: device float, multiplies A
  const void* b_scale = nullptr;
  int8_t fast_accumulation = 0;  // accepted; the emulator always accumulates in full fp32
};

struct Layout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
};

struct Preference {
  uint64_t max_workspace = 0;
  uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint32_t min_alignment[4] = {kDefaultAlignment, kDefaultAlignment, kDefaultAlignment, kDefaultAlignment};
};

cublasStatus_t refuse(cublasStatus_t status, const std::string& why) {
  std::fprintf(stderr, "nanoforge CUDA emulator: cuBLASLt: %s (%s)\n", why.c_str(),
               cublasLtGetStatusName(status));
  std::fflush(stderr);
  return status;
}

template <class T>
cublasStatus_t read_attribute(T& field, const void* buffer, size_t bytes, const char* name) {
  if (buffer == nullptr || bytes != sizeof(T)) {
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  fmt::format("attribute {} takes {} bytes, got {}", name, sizeof(T), bytes));
  }
  std::memcpy(&field, buffer, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool is_fp8(cudaDataType_t type) {
  return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2;
}

size_t type_bytes(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2:
      return 1;
    case CUDA_R_16BF:
    case CUDA_R_16F:
      return 2;
    case CUDA_R_32F:
      return 4;
    default:
      return 0;
  }
}

const char* type_name(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_16BF:
      return "bf16";
    case CUDA_R_32F:
      return "f32";
    case CUDA_R_8F_E4M3:
      return "e4m3";
    case CUDA_R_8F_E5M2:
      return "e5m2";
    default:
      return "an unsupported type";
  }
}

// The matrix a layout describes, element (r, c).
size_t element_offset(const Layout& l, uint64_t r, uint64_t c) {
  return l.order == CUBLASLT_ORDER_ROW ? r * static_cast<uint64_t>(l.ld) + c
                                       : c * static_cast<uint64_t>(l.ld) + r;
}

// Elements from the first to one past the last the layout can touch.
size_t extent_elements(const Layout& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  return element_offset(l, l.rows - 1, l.cols - 1) + 1;
}

float load(const void* base, cudaDataType_t type, size_t offset) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[offset];
  if (is_fp8(type)) {
    const __nv_fp8_storage_t code = static_cast<const __nv_fp8_storage_t*>(base)[offset];
    return __half2float(
        __half(__nv_cvt_fp8_to_halfraw(code, type == CUDA_R_8F_E4M3 ? __NV_E4M3 : __NV_E5M2)));
  }
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[offset]);
}

void store(void* base, cudaDataType_t type, size_t offset, float value) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(base)[offset] = value;
  } else {
    static_cast<__nv_bfloat16*>(base)[offset] = __float2bfloat16_rn(value);
  }
}

uint32_t pointer_alignment(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = kDefaultAlignment;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

uint32_t power_of_two_dividing(uint64_t bytes, uint32_t at_most) {
  uint32_t alignment = at_most;
  while (alignment > 1 && bytes % alignment != 0)
    alignment /= 2;
  return alignment;
}

// The problem's shape after the transposes: op(A) (m, k), op(B) (k, n), C and D (m, n).
struct Shape {
  uint64_t m = 0, n = 0, k = 0;
};

// NVIDIA's FP8 constraints (cuBLASLt documentation, cublasLtMatmul: FP8 data types): see the header.
cublasStatus_t check_fp8_problem(const MatmulDesc& d, const Layout& a, const Layout& b, const Layout& out) {
  const DeviceProfile& profile = device_profile();
  if (profile.major * 10 + profile.minor < 89) {
    return refuse(
        CUBLAS_STATUS_NOT_SUPPORTED,
        fmt::format("FP8 GEMMs need compute capability 8.9 or newer; this GPU is {}", profile.architecture));
  }
  if (!is_fp8(a.type) || !is_fp8(b.type) || (a.type == CUDA_R_8F_E5M2 && b.type == CUDA_R_8F_E5M2)) {
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  fmt::format("A is {} and B {}: FP8 GEMMs take two FP8 operands, not both e5m2",
                              type_name(a.type), type_name(b.type)));
  }
  if (d.transa != CUBLAS_OP_T || d.transb != CUBLAS_OP_N || a.order != CUBLASLT_ORDER_COL ||
      b.order != CUBLASLT_ORDER_COL) {
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "FP8 GEMMs take column-major A transposed and B not transposed (the \"TN\" layout)");
  }
  const uint64_t k = a.rows;  // op(A) = A^T: K is A's row count
  if (k % 16 != 0 || a.ld % 16 != 0 || b.ld % 16 != 0) {
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  fmt::format("FP8 GEMMs need K ({}) and the leading dimensions of A ({}) and B ({}) to be "
                              "multiples of 16",
                              k, a.ld, b.ld));
  }
  if (out.type != CUDA_R_16BF && out.type != CUDA_R_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "an FP8 GEMM's D must be bf16 or f32 here");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_problem(const MatmulDesc& d, const Layout& a, const Layout& b, const Layout& c,
                             const Layout& out, Shape* shape) {
  if (d.compute != CUBLAS_COMPUTE_32F && d.compute != CUBLAS_COMPUTE_32F_FAST_16BF)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  fmt::format("compute type {} is not emulated", static_cast<int>(d.compute)));
  if (d.scale != CUDA_R_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "scale type must be CUDA_R_32F with fp32 compute");
  if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "only host alpha and beta (CUBLASLT_POINTER_MODE_HOST) are emulated");
  if (d.transc != CUBLAS_OP_N)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "CUBLASLT_MATMUL_DESC_TRANSC must be CUBLAS_OP_N");
  const uint32_t known_epilogues[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU,
                                      CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS};
  bool known = false;
  for (const uint32_t e : known_epilogues)
    known = known || d.epilogue == e;
  if (!known)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("epilogue {} is not emulated", d.epilogue));
  if ((d.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0 && d.bias == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "a bias epilogue needs CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  if (is_fp8(a.type) || is_fp8(b.type)) {
    if (const cublasStatus_t status = check_fp8_problem(d, a, b, out); status != CUBLAS_STATUS_SUCCESS)
      return status;
  } else if ((a.type != CUDA_R_16BF && a.type != CUDA_R_32F) || b.type != a.type) {
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("A is {} and B {}: both bf16 or both f32",
                                                           type_name(a.type), type_name(b.type)));
  }
  if ((out.type != CUDA_R_16BF && out.type != CUDA_R_32F) || c.type != out.type)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("C is {} and D {}: the same type, bf16 or f32",
                                                           type_name(c.type), type_name(out.type)));
  if (a.type == CUDA_R_32F && out.type == CUDA_R_16BF)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "f32 A and B with a bf16 D");
  for (const Layout* l : {&a, &b, &c, &out}) {
    if (l->order != CUBLASLT_ORDER_COL && l->order != CUBLASLT_ORDER_ROW)
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                    "only CUBLASLT_ORDER_COL and CUBLASLT_ORDER_ROW layouts are emulated");
    if (l->batch != 1) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "batched layouts are not emulated");
    const uint64_t inner = l->order == CUBLASLT_ORDER_COL ? l->rows : l->cols;
    if (l->ld < 0 || static_cast<uint64_t>(l->ld) < std::max<uint64_t>(inner, 1)) {
      return refuse(
          CUBLAS_STATUS_INVALID_VALUE,
          fmt::format("a ({}, {}) {} layout with leading dimension {}: it must be at least {}, or the {} "
                      "overlap",
                      l->rows, l->cols, l->order == CUBLASLT_ORDER_COL ? "column-major" : "row-major", l->ld,
                      inner, l->order == CUBLASLT_ORDER_COL ? "columns" : "rows"));
    }
  }
  const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
  shape->m = ta ? a.cols : a.rows;
  shape->k = ta ? a.rows : a.cols;
  const uint64_t k_b = tb ? b.cols : b.rows;
  shape->n = tb ? b.rows : b.cols;
  if (shape->k != k_b || c.rows != shape->m || c.cols != shape->n || out.rows != shape->m ||
      out.cols != shape->n) {
    return refuse(
        CUBLAS_STATUS_INVALID_VALUE,
        fmt::format("op(A) is ({}, {}) and op(B) ({}, {}), which do not multiply into C ({}, {}) and D ({}, "
                    "{}) (A is ({}, {}){}, B is ({}, {}){})",
                    shape->m, shape->k, k_b, shape->n, c.rows, c.cols, out.rows, out.cols, a.rows, a.cols,
                    ta ? " transposed" : "", b.rows, b.cols, tb ? " transposed" : ""));
  }
  return CUBLAS_STATUS_SUCCESS;
}

uint64_t fingerprint(const MatmulDesc& d, const Layout& a, const Layout& b, const Layout& c,
                     const Layout& out) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](uint64_t value) { hash = (hash ^ value) * 1099511628211ull; };
  for (const Layout* l : {&a, &b, &c, &out}) {
    mix(static_cast<uint64_t>(l->type));
    mix(l->rows);
    mix(l->cols);
    mix(static_cast<uint64_t>(l->ld));
    mix(static_cast<uint64_t>(l->order));
  }
  mix(static_cast<uint64_t>(d.transa));
  mix(static_cast<uint64_t>(d.transb));
  mix(d.epilogue);
  mix(static_cast<uint64_t>(d.compute));
  return hash;
}

// What a chosen algorithm assumes of each operand's alignment: what the preference promised, at most a
// vector, and no more than every column (or row) start keeps.
uint32_t required_alignment(uint32_t promised, const Layout& l) {
  const uint32_t by_stride =
      power_of_two_dividing(static_cast<uint64_t>(l.ld) * type_bytes(l.type), kVectorBytes);
  return std::min({promised, kVectorBytes, by_stride});
}

void compute(const MatmulDesc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& out,
             const Shape& s, float alpha, float beta, const void* a_data, const void* b_data,
             const void* c_data, void* d_data) {
  const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
  std::vector<float> op_a(s.m * s.k), op_b(s.k * s.n), product(s.m * s.n, 0.0f);
  // FP8 operands times their tensorwise scale, rounded to fp32 (1 for other types).
  const float a_scale = is_fp8(a.type) ? *static_cast<const float*>(d.a_scale) : 1.0f;
  const float b_scale = is_fp8(b.type) ? *static_cast<const float*>(d.b_scale) : 1.0f;
  for (uint64_t i = 0; i < s.m; ++i) {
    for (uint64_t p = 0; p < s.k; ++p)
      op_a[i * s.k + p] =
          load(a_data, a.type, ta ? element_offset(a, p, i) : element_offset(a, i, p)) * a_scale;
  }
  for (uint64_t p = 0; p < s.k; ++p) {
    for (uint64_t j = 0; j < s.n; ++j)
      op_b[p * s.n + j] =
          load(b_data, b.type, tb ? element_offset(b, j, p) : element_offset(b, p, j)) * b_scale;
  }
  if (s.k > 0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m), static_cast<int>(s.n),
                static_cast<int>(s.k), 1.0f, op_a.data(), static_cast<int>(s.k), op_b.data(),
                static_cast<int>(s.n), 0.0f, product.data(), static_cast<int>(s.n));
  }
  const cudaDataType_t bias_type = d.bias_type < 0 ? out.type : static_cast<cudaDataType_t>(d.bias_type);
  for (uint64_t i = 0; i < s.m; ++i) {
    for (uint64_t j = 0; j < s.n; ++j) {
      float value = alpha * product[i * s.n + j];
      if (beta != 0.0f)
        value += beta * load(c_data, c.type, element_offset(c, i, j));  // C is not read for beta 0
      if ((d.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0) value += load(d.bias, bias_type, i);
      if ((d.epilogue & CUBLASLT_EPILOGUE_RELU) != 0 && !(value > 0.0f)) value = 0.0f;
      store(d_data, out.type, element_offset(out, i, j), value);
    }
  }
}

[[noreturn]] void fatal(const std::string& message) {
  std::fprintf(stderr, "nanoforge CUDA emulator: cuBLASLt: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

// Fails the program when an operand is not device memory of the handle's GPU holding the whole layout: a GPU
// would read or write outside it.
void check_operand(const void* pointer, const Layout& l, int device, const char* name) {
  const size_t bytes = extent_elements(l) * type_bytes(l.type);
  if (bytes == 0) return;
  const Allocation* whole = find_allocation(pointer, bytes);
  if (whole != nullptr && whole->device == device) return;
  const Allocation* start = find_allocation(pointer);
  if (start == nullptr) {
    fatal(fmt::format("matrix {} at {} is not GPU memory (host memory, freed memory or garbage)", name,
                      pointer));
  }
  fatal(fmt::format(
      "matrix {} ({}, {}) with leading dimension {} spans {} bytes from {}, past the end of allocation "
      "#{} ({} bytes at {}) on GPU {}",
      name, l.rows, l.cols, l.ld, bytes, pointer, start->serial, start->bytes,
      static_cast<void*>(start->base), start->device));
}

template <class T>
T* as(void* opaque) {
  return reinterpret_cast<T*>(opaque);
}

}  // namespace
}  // namespace nanoforge::emulator

using namespace nanoforge::emulator;

extern "C" {

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    default:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    default:
      return "an internal operation failed";
  }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  if (!valid_device(current_device())) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "no current GPU");
  *handle = reinterpret_cast<cublasLtHandle_t>(new Handle{current_device()});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<Handle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  auto* d = new MatmulDesc();
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete as<MatmulDesc>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute, const void* buffer,
                                              size_t bytes) {
  MatmulDesc& d = *as<MatmulDesc>(desc);
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return read_attribute(d.compute, buffer, bytes, "CUBLASLT_MATMUL_DESC_COMPUTE_TYPE");
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return read_attribute(d.scale, buffer, bytes, "CUBLASLT_MATMUL_DESC_SCALE_TYPE");
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return read_attribute(d.pointer_mode, buffer, bytes, "CUBLASLT_MATMUL_DESC_POINTER_MODE");
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return read_attribute(d.transa, buffer, bytes, "CUBLASLT_MATMUL_DESC_TRANSA");
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return read_attribute(d.transb, buffer, bytes, "CUBLASLT_MATMUL_DESC_TRANSB");
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return read_attribute(d.transc, buffer, bytes, "CUBLASLT_MATMUL_DESC_TRANSC");
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return read_attribute(d.epilogue, buffer, bytes, "CUBLASLT_MATMUL_DESC_EPILOGUE");
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read_attribute(d.bias, buffer, bytes, "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return read_attribute(d.bias_type, buffer, bytes, "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
      return read_attribute(d.a_scale, buffer, bytes, "CUBLASLT_MATMUL_DESC_A_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
      return read_attribute(d.b_scale, buffer, bytes, "CUBLASLT_MATMUL_DESC_B_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
      return read_attribute(d.fast_accumulation, buffer, bytes, "CUBLASLT_MATMUL_DESC_FAST_ACCUM");
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("matmul descriptor attribute {} is not emulated",
                                                             static_cast<int>(attribute)));
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  auto* l = new Layout();
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete as<Layout>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute, const void* buffer,
                                                size_t bytes) {
  Layout& l = *as<Layout>(layout);
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: {
      uint32_t type = 0;
      const cublasStatus_t status = read_attribute(type, buffer, bytes, "CUBLASLT_MATRIX_LAYOUT_TYPE");
      l.type = static_cast<cudaDataType_t>(type);
      return status;
    }
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return read_attribute(l.order, buffer, bytes, "CUBLASLT_MATRIX_LAYOUT_ORDER");
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return read_attribute(l.rows, buffer, bytes, "CUBLASLT_MATRIX_LAYOUT_ROWS");
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return read_attribute(l.cols, buffer, bytes, "CUBLASLT_MATRIX_LAYOUT_COLS");
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return read_attribute(l.ld, buffer, bytes, "CUBLASLT_MATRIX_LAYOUT_LD");
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return read_attribute(l.batch, buffer, bytes, "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                    fmt::format("matrix layout attribute {} is not emulated", static_cast<int>(attribute)));
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  *preference = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete as<Preference>(preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* buffer, size_t bytes) {
  Preference& p = *as<Preference>(preference);
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return read_attribute(p.max_workspace, buffer, bytes, "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return read_attribute(p.reduction_mask, buffer, bytes, "CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return read_attribute(p.min_alignment[attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buffer,
                            bytes, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES");
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("matmul preference attribute {} is not emulated",
                                                             static_cast<int>(attribute)));
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  *returned = 0;
  if (handle == nullptr || requested < 1)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "heuristic query without a handle");
  const MatmulDesc& d = *as<MatmulDesc>(desc);
  const Layout &a = *as<Layout>(a_desc), &b = *as<Layout>(b_desc), &c = *as<Layout>(c_desc),
               &out = *as<Layout>(d_desc);
  const Preference& p = *as<Preference>(preference);
  Shape shape;
  if (const cublasStatus_t status = check_problem(d, a, b, c, out, &shape); status != CUBLAS_STATUS_SUCCESS)
    return status;
  // cublaslt=no-algorithm: what cuBLASLt answers for a problem none of its kernels takes.
  if (settings().cublaslt_no_algorithm) return CUBLAS_STATUS_NOT_SUPPORTED;
  const Layout* layouts[4] = {&a, &b, &c, &out};
  uint32_t required[4];
  for (int i = 0; i < 4; ++i) {
    // No algorithm reads elements from addresses less aligned than their own size.
    if (p.min_alignment[i] < type_bytes(layouts[i]->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    required[i] = required_alignment(p.min_alignment[i], *layouts[i]);
  }
  cublasLtMatmulHeuristicResult_t& result = results[0];
  result = cublasLtMatmulHeuristicResult_t{};
  result.algo.data[0] = kAlgorithmMagic;
  result.algo.data[1] = fingerprint(d, a, b, c, out);
  for (int i = 0; i < 4; ++i)
    result.algo.data[2 + i] = required[i];
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* a_data, cublasLtMatrixLayout_t a_desc, const void* b_data,
                              cublasLtMatrixLayout_t b_desc, const void* beta, const void* c_data,
                              cublasLtMatrixLayout_t c_desc, void* d_data, cublasLtMatrixLayout_t d_desc,
                              const cublasLtMatmulAlgo_t* algorithm, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream_handle) {
  std::unique_lock<std::mutex> lock(runtime_mutex());
  if (handle == nullptr) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmul without a handle");
  const int device = reinterpret_cast<Handle*>(handle)->device;
  const MatmulDesc d = *as<MatmulDesc>(desc);
  const Layout a = *as<Layout>(a_desc), b = *as<Layout>(b_desc), c = *as<Layout>(c_desc),
               out = *as<Layout>(d_desc);
  Shape shape;
  if (const cublasStatus_t status = check_problem(d, a, b, c, out, &shape); status != CUBLAS_STATUS_SUCCESS)
    return status;
  if (algorithm == nullptr || algorithm->data[0] != kAlgorithmMagic ||
      algorithm->data[1] != fingerprint(d, a, b, c, out)) {
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "the algorithm was not returned by cublasLtMatmulAlgoGetHeuristic for these descriptors");
  }
  const void* pointers[4] = {a_data, b_data, c_data, d_data};
  const char* names[4] = {"A", "B", "C", "D"};
  if (is_fp8(a.type) && (d.a_scale == nullptr || d.b_scale == nullptr)) {
    return refuse(
        CUBLAS_STATUS_INVALID_VALUE,
        "FP8 GEMMs need CUBLASLT_MATMUL_DESC_A_SCALE_POINTER and B_SCALE_POINTER (tensorwise scales)");
  }
  if (is_fp8(a.type) && (pointer_alignment(a_data) < 16 || pointer_alignment(b_data) < 16)) {
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  fmt::format("FP8 GEMMs need 16-byte aligned A and B ({} and {})", a_data, b_data));
  }
  for (int i = 0; i < 4; ++i) {
    if (pointer_alignment(pointers[i]) < algorithm->data[2 + i]) {
      return refuse(
          CUBLAS_STATUS_INVALID_VALUE,
          fmt::format("matrix {} at {} is {}-byte aligned, but the algorithm was chosen for {}-byte aligned "
                      "operands (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{}_BYTES)",
                      names[i], pointers[i], pointer_alignment(pointers[i]), algorithm->data[2 + i],
                      names[i]));
    }
  }
  if (workspace_bytes > 0 && find_allocation(workspace, workspace_bytes) == nullptr)
    fatal(fmt::format("the workspace ({} bytes at {}) is not GPU memory", workspace_bytes, workspace));
  Stream* stream = resolve_stream(stream_handle);
  if (stream == nullptr || stream_device(stream) != device)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "the stream is not a stream of the handle's GPU");
  const float alpha_value = *static_cast<const float*>(alpha);  // host pointers, read at the call
  const float beta_value = *static_cast<const float*>(beta);
  check_operand(a_data, a, device, "A");
  check_operand(b_data, b, device, "B");
  if (beta_value != 0.0f) check_operand(c_data, c, device, "C");
  check_operand(d_data, out, device, "D");
  for (const void* scale : {d.a_scale, d.b_scale}) {
    if (scale != nullptr && find_allocation(scale, sizeof(float)) == nullptr)
      fatal(fmt::format("the FP8 scale at {} is not GPU memory", scale));
  }
  const size_t d_bytes = extent_elements(out) * type_bytes(out.type);
  for (int i = 0; i < 2; ++i) {
    const size_t bytes = extent_elements(*(i == 0 ? &a : &b)) * type_bytes(a.type);
    const auto* begin = static_cast<const char*>(pointers[i]);
    const auto* d_begin = static_cast<const char*>(d_data);
    if (begin < d_begin + d_bytes && d_begin < begin + bytes)
      fatal(fmt::format("matrix D at {} overlaps matrix {} at {}", d_data, names[i], pointers[i]));
  }
  enqueue(stream, "cublasLtMatmul", [=] {
    ++mutable_counters().gemms;
    compute(d, a, b, c, out, shape, alpha_value, beta_value, a_data, b_data, c_data, d_data);
    return Progress::kDone;
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
