// Which GEMM the MLP's ReLU² ops (ops::linear_relu_squared_forward, ops::relu_squared_linear_backward) run on
// the GPU: cuBLASLt followed by the ReLU² pass, or our GEMM with ReLU² in its epilogue
// (kernels/cuda/mlp_gemm.cu), which writes 16 of the two passes' 20 activation-sized transfers fewer per
// layer but runs on mma.sync, slower than cuBLASLt where the tensor cores are the limit. A field of the ops'
// KernelSettings (kernels/kernel_settings.h) chosen from the recipe key model.mlp_gemm. The CPU backend runs
// the GEMM and the activation as two ops either way.
#pragma once

namespace nanoforge::ops {

enum class MlpGemm { kCublasLt, kFused };

const char* mlp_gemm_name(MlpGemm gemm);  // "cublaslt", "fused"

// What model.mlp_gemm = auto picks for a GPU of this compute capability major version: our GEMM on the
// Blackwell GB10 class (12.x: no wgmma, and a memory bandwidth that makes the ReLU² passes as costly as the
// GEMMs; docs/kernels.md "The MLP GEMM"), cuBLASLt elsewhere. A prediction of the performance model,
// not yet a measurement.
MlpGemm automatic_mlp_gemm(int compute_capability_major);

}  // namespace nanoforge::ops
