// cuBLASLt's "no algorithm" answer, which a real heuristic gives for a problem none of its kernels takes
// (the emulator's cublaslt=no-algorithm switch): the stand-in answers as cuBLASLt does, and the CUDA matmul
// stops with a message naming the GEMM's shape, transposes and alignments instead of a bare cuBLAS status.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <vector>

#include "emulator/emulator.h"
#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "tests/emulator/emulator_test_support.h"

namespace nanoforge {
namespace {

// A 48 x 64 @ 64 x 80 GEMM with f32 out, asked of a cuBLASLt whose heuristic finds nothing.
void matmul_without_an_algorithm() {
  emulator::settings().cublaslt_no_algorithm = true;
  DeviceBuffer a(Device::kCuda, 48 * 64 * 2), b(Device::kCuda, 64 * 80 * 2), out(Device::kCuda, 48 * 80 * 4);
  ops::matmul(TensorView(out.data(), {48, 80}, DType::kF32, Device::kCuda),
              TensorView(a.data(), {48, 64}, DType::kBF16, Device::kCuda), ops::Transpose::kNo,
              TensorView(b.data(), {64, 80}, DType::kBF16, Device::kCuda), ops::Transpose::kNo, 1.0, 0.0);
}

TEST(CublasLt, NoAlgorithmFallsBackOrNamesShape) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(matmul_without_an_algorithm(),
               "cuBLASLt has no algorithm for out \\(48, 80\\) f32 = a bf16 @ b bf16 with K = 64");
}

TEST(CublasLt, NoAlgorithmSwitchAnswersAsCublasLtDoes) {
  emulator_test::ScopedSettings saved;
  emulator::settings().cublaslt_no_algorithm = true;
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t operation = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 16, 16, 16), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t out_layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&out_layout, CUDA_R_32F, 16, 16, 16), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, operation, layout, layout, out_layout, out_layout,
                                           preference, 1, &result, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(found, 0);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(out_layout);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulDescDestroy(operation);
  cublasLtDestroy(handle);
}

}  // namespace
}  // namespace nanoforge
