// CPU matmul: one OpenBLAS GEMM over row-major 2-D views (see kernels/cpu/blas.h for the threading).
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {

template <class T>
void matmul(TensorView out, TensorView a, Transpose transpose_a, TensorView b, Transpose transpose_b,
            double alpha, double beta) {
  check_rank(out, 2, "matmul", "out");
  check_rank(a, 2, "matmul", "a");
  check_rank(b, 2, "matmul", "b");
  const bool ta = transpose_a == Transpose::kYes;
  const bool tb = transpose_b == Transpose::kYes;
  const int64_t m = ta ? a.shape[1] : a.shape[0];
  const int64_t k = ta ? a.shape[0] : a.shape[1];
  const int64_t k_b = tb ? b.shape[1] : b.shape[0];
  const int64_t n = tb ? b.shape[0] : b.shape[1];
  NANOFORGE_CHECK(k == k_b && out.shape[0] == m && out.shape[1] == n, "matmul: {}{} @ {}{} does not give {}",
                  a.describe(), ta ? "^T" : "", b.describe(), tb ? "^T" : "", out.describe());
  if (m == 0 || n == 0) return;
  gemm<T>(ta, tb, m, n, k, static_cast<T>(alpha), a.as<T>(), a.shape[1], b.as<T>(), b.shape[1],
          static_cast<T>(beta), out.as<T>(), n);
}

NANOFORGE_CPU_INSTANTIATE(matmul);

}  // namespace nanoforge::cpu
