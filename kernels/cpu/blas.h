// Row-major GEMM for float and double through OpenBLAS's CBLAS, so templated CPU kernels can call one name.
// Inside an OpenMP parallel region the OpenMP build of OpenBLAS runs single-threaded; outside it uses all
// OpenMP threads.
#pragma once

#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace nanoforge::cpu {

// c (m, n) = alpha * op(a) (m, k) @ op(b) (k, n) + beta * c, with leading dimensions (row strides) lda, ldb,
// ldc.
template <class T>
inline void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = transpose_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb),
                beta, c, static_cast<blasint>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb),
                beta, c, static_cast<blasint>(ldc));
  }
}

}  // namespace nanoforge::cpu
