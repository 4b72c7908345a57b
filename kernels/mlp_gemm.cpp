// The MLP GEMM setting (kernels/mlp_gemm.h).
#include "kernels/mlp_gemm.h"

#include <atomic>

namespace nanoforge::ops {
namespace {
std::atomic<MlpGemm> chosen{MlpGemm::kCublasLt};
}  // namespace

const char* mlp_gemm_name(MlpGemm gemm) {
  return gemm == MlpGemm::kFused ? "fused" : "cublaslt";
}

void set_mlp_gemm(MlpGemm gemm) {
  chosen.store(gemm);
}

MlpGemm mlp_gemm() {
  return chosen.load();
}

MlpGemm automatic_mlp_gemm(int compute_capability_major) {
  return compute_capability_major == 12 ? MlpGemm::kFused : MlpGemm::kCublasLt;
}

}  // namespace nanoforge::ops
