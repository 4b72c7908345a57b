// The emulator's cuBLASLt computes what the descriptors describe: column- and row-major layouts with padded
// leading dimensions, both transposes, bf16 or f32 out, alpha and beta with C = D, bias and ReLU epilogues,
// against a double reference. And it refuses what cuBLASLt refuses: a leading dimension that lets columns
// overlap, shapes that do not multiply, an algorithm chosen for another problem, an operand less aligned than
// the preference promised, an alignment below the element size.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/emulator/emulator_test_support.h"

namespace nanoforge::emulator_test {
namespace {

uint16_t to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

float from_bf16(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// A matrix as cuBLASLt sees it: rows x cols in `order`, leading dimension ld.
struct Matrix {
  int64_t rows, cols, ld;
  cublasLtOrder_t order;
  size_t offset(int64_t r, int64_t c) const {
    return static_cast<size_t>(order == CUBLASLT_ORDER_COL ? c * ld + r : r * ld + c);
  }
  size_t elements() const {
    return order == CUBLASLT_ORDER_COL ? static_cast<size_t>(ld * cols) : static_cast<size_t>(ld * rows);
  }
};

cublasLtMatrixLayout_t layout_of(const Matrix& m, cudaDataType type) {
  cublasLtMatrixLayout_t layout = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(m.rows),
                                       static_cast<uint64_t>(m.cols), m.ld),
            CUBLAS_STATUS_SUCCESS);
  const int32_t order = m.order;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)),
            CUBLAS_STATUS_SUCCESS);
  return layout;
}

struct GemmCase {
  bool transpose_a, transpose_b;
  cublasLtOrder_t order;
  bool out_bf16;
  uint32_t epilogue;
};

// D = alpha op(A) op(B) + beta D_start, then the epilogue's bias and ReLU, against a double reference: op(A)
// is (m, k), op(B) (k, n), D (m, n).
void expect_matches_reference(const GemmCase& g, const Matrix& a, const Matrix& b, const Matrix& d,
                              const std::vector<uint16_t>& a_bits, const std::vector<uint16_t>& b_bits,
                              const std::vector<float>& d_start, const std::vector<float>& bias, float alpha,
                              float beta, const std::vector<float>& got) {
  const int64_t m = d.rows, n = d.cols, k = g.transpose_a ? a.rows : a.cols;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = from_bf16(a_bits[g.transpose_a ? a.offset(p, i) : a.offset(i, p)]);
        const double y = from_bf16(b_bits[g.transpose_b ? b.offset(j, p) : b.offset(p, j)]);
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      double expected = alpha * sum + beta * d_start[d.offset(i, j)];
      if ((g.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0) expected += bias[static_cast<size_t>(i)];
      if ((g.epilogue & CUBLASLT_EPILOGUE_RELU) != 0) expected = std::max(expected, 0.0);
      const double tolerance = (g.out_bf16 ? std::abs(expected) / 256 : 0) + 1e-6 * (magnitude + 1);
      EXPECT_NEAR(got[d.offset(i, j)], expected, tolerance) << "D(" << i << ", " << j << ")";
    }
  }
}

class EmulatorCublasLt : public testing::TestWithParam<GemmCase> {
 protected:
  void SetUp() override { ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { cublasLtDestroy(handle_); }
  cublasLtHandle_t handle_ = nullptr;
};

TEST_P(EmulatorCublasLt, ComputesWhatTheDescriptorsDescribe) {
  const GemmCase g = GetParam();
  const int64_t m = 5, n = 7, k = 9, pad = 3;
  // op(A) is (m, k): A is (k, m) when transposed; op(B) is (k, n).
  const auto matrix = [&](int64_t rows, int64_t cols) {
    return Matrix{rows, cols, (g.order == CUBLASLT_ORDER_COL ? rows : cols) + pad, g.order};
  };
  const Matrix a = g.transpose_a ? matrix(k, m) : matrix(m, k);
  const Matrix b = g.transpose_b ? matrix(n, k) : matrix(k, n);
  const Matrix d = matrix(m, n);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> a_bits(a.elements()), b_bits(b.elements());
  for (auto& bits : a_bits)
    bits = to_bf16(normal(rng));
  for (auto& bits : b_bits)
    bits = to_bf16(normal(rng));
  std::vector<float> d_start(d.elements()), bias(static_cast<size_t>(m));
  for (float& value : d_start)
    value = from_bf16(to_bf16(normal(rng)));
  for (float& value : bias)
    value = normal(rng);

  const cudaDataType out_type = g.out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  DeviceArray<uint16_t> a_device(a.elements()), b_device(b.elements());
  a_device.upload(a_bits);
  b_device.upload(b_bits);
  DeviceArray<float> d_f32(d.elements()), bias_device(bias.size());
  DeviceArray<uint16_t> d_bf16(d.elements());
  bias_device.upload(bias);
  std::vector<uint16_t> d_start_bits(d.elements());
  for (size_t i = 0; i < d_start.size(); ++i)
    d_start_bits[i] = to_bf16(d_start[i]);
  d_f32.upload(d_start);
  d_bf16.upload(d_start_bits);
  void* d_data = g.out_bf16 ? static_cast<void*>(d_bf16.get()) : static_cast<void*>(d_f32.get());

  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const int32_t transa = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                transb = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof(g.epilogue)),
      CUBLAS_STATUS_SUCCESS);
  const float* bias_pointer = bias_device.get();
  const int32_t bias_type = CUDA_R_32F;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer,
                                           sizeof(bias_pointer)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                           sizeof(bias_type)),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t a_layout = layout_of(a, CUDA_R_16BF), b_layout = layout_of(b, CUDA_R_16BF),
                         d_layout = layout_of(d, out_type);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle_, desc, a_layout, b_layout, d_layout, d_layout, preference,
                                           1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  const float alpha = 0.5f, beta = 0.25f;
  ASSERT_EQ(cublasLtMatmul(handle_, desc, &alpha, a_device.get(), a_layout, b_device.get(), b_layout, &beta,
                           d_data, d_layout, d_data, d_layout, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);

  std::vector<float> got(d.elements());
  if (g.out_bf16) {
    const std::vector<uint16_t> bits = d_bf16.download();
    for (size_t i = 0; i < bits.size(); ++i)
      got[i] = from_bf16(bits[i]);
  } else {
    got = d_f32.download();
  }
  expect_matches_reference(g, a, b, d, a_bits, b_bits, d_start, bias, alpha, beta, got);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(a_layout);
  cublasLtMatrixLayoutDestroy(b_layout);
  cublasLtMatrixLayoutDestroy(d_layout);
  cublasLtMatmulDescDestroy(desc);
}

std::string case_name(const testing::TestParamInfo<GemmCase>& info) {
  const GemmCase& g = info.param;
  std::string name = std::string(g.transpose_a ? "aT" : "a") + (g.transpose_b ? "_bT" : "_b") +
                     (g.order == CUBLASLT_ORDER_COL ? "_col" : "_row") + (g.out_bf16 ? "_bf16" : "_f32");
  if (g.epilogue == CUBLASLT_EPILOGUE_BIAS) name += "_bias";
  if (g.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) name += "_relu_bias";
  return name;
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const cublasLtOrder_t order : {CUBLASLT_ORDER_COL, CUBLASLT_ORDER_ROW}) {
        for (const bool bf16 : {false, true})
          cases.push_back({ta, tb, order, bf16, CUBLASLT_EPILOGUE_DEFAULT});
      }
    }
  }
  cases.push_back({false, true, CUBLASLT_ORDER_COL, false, CUBLASLT_EPILOGUE_BIAS});
  cases.push_back({true, false, CUBLASLT_ORDER_ROW, true, CUBLASLT_EPILOGUE_RELU_BIAS});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(LayoutsTransposesTypes, EmulatorCublasLt, testing::ValuesIn(gemm_cases()),
                         case_name);

// A (m, k) x B (k, n) problem in column-major bf16 with f32 out, for the refusals.
struct Problem {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;

  Problem(int64_t m, int64_t n, int64_t k, int64_t b_rows, int64_t a_ld) {
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, static_cast<uint64_t>(m), static_cast<uint64_t>(k), a_ld);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, static_cast<uint64_t>(b_rows), static_cast<uint64_t>(n),
                               b_rows);
    cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m);
    cublasLtMatmulPreferenceCreate(&preference);
  }
  ~Problem() {
    cublasLtMatmulPreferenceDestroy(preference);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatmulDescDestroy(desc);
  }
  cublasStatus_t heuristic(cublasLtHandle_t handle, cublasLtMatmulHeuristicResult_t* result) const {
    int found = 0;
    return cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, preference, 1, result, &found);
  }
};

TEST(EmulatorCublasLtRefusals, RefusesWhatCublasLtRefuses) {
  cublasLtHandle_t handle_ = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  EXPECT_EQ(Problem(8, 8, 8, 8, /*a_ld=*/4).heuristic(handle_, &result), CUBLAS_STATUS_INVALID_VALUE)
      << "a leading dimension below the row count";
  EXPECT_EQ(Problem(8, 8, 8, /*b_rows=*/9, 8).heuristic(handle_, &result), CUBLAS_STATUS_INVALID_VALUE)
      << "op(A) (8, 8) times op(B) (9, 8)";

  Problem problem(8, 8, 8, 8, 8), other(8, 8, 16, 16, 8);
  ASSERT_EQ(problem.heuristic(handle_, &result), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t other_result{};
  ASSERT_EQ(other.heuristic(handle_, &other_result), CUBLAS_STATUS_SUCCESS);
  DeviceArray<uint16_t> a(130), b(128);
  DeviceArray<float> d(64);
  const float alpha = 1, beta = 0;
  EXPECT_EQ(cublasLtMatmul(handle_, problem.desc, &alpha, a.get(), problem.a, b.get(), problem.b, &beta,
                           d.get(), problem.d, d.get(), problem.d, &other_result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE)
      << "an algorithm chosen for another problem";
  EXPECT_EQ(cublasLtMatmul(handle_, problem.desc, &alpha, a.get() + 1, problem.a, b.get(), problem.b, &beta,
                           d.get(), problem.d, d.get(), problem.d, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE)
      << "A 2-byte aligned, chosen for the default 256";
  const uint32_t two = 2;
  cublasLtMatmulPreferenceSetAttribute(problem.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &two,
                                       sizeof(two));
  ASSERT_EQ(problem.heuristic(handle_, &result), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmul(handle_, problem.desc, &alpha, a.get() + 1, problem.a, b.get(), problem.b, &beta,
                           d.get(), problem.d, d.get(), problem.d, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS)
      << "A 2-byte aligned, chosen for 2";
  const uint32_t one = 1;
  cublasLtMatmulPreferenceSetAttribute(problem.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &one,
                                       sizeof(one));
  EXPECT_EQ(problem.heuristic(handle_, &result), CUBLAS_STATUS_NOT_SUPPORTED) << "B promised 1-byte aligned";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cublasLtDestroy(handle_);
}

}  // namespace
}  // namespace nanoforge::emulator_test
