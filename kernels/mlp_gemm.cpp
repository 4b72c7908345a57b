// The MLP GEMMs' names and what auto picks (kernels/mlp_gemm.h).
#include "kernels/mlp_gemm.h"

namespace nanoforge::ops {
const char* mlp_gemm_name(MlpGemm gemm) {
  return gemm == MlpGemm::kFused ? "fused" : "cublaslt";
}

MlpGemm automatic_mlp_gemm(int compute_capability_major) {
  return compute_capability_major == 12 ? MlpGemm::kFused : MlpGemm::kCublasLt;
}

}  // namespace nanoforge::ops
