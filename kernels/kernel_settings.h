// Which kernels the ops run, as one value: the attention implementation, the MLP GEMM, deterministic
// reductions and FP8 GEMMs. Chosen once per run from the recipe and the device (train/), held by the model
// and passed to every op that reads it (kernels/op_list.inc), so two models in one process may run different
// kernels. The CPU backend takes it and ignores it (it is deterministic, and has one attention and one GEMM).
#pragma once

#include <string>

#include "kernels/attention_implementation.h"
#include "kernels/mlp_gemm.h"

namespace nanoforge::ops {

struct KernelSettings {
  AttentionImplementation attention = AttentionImplementation::kFlash;
  MlpGemm mlp_gemm = MlpGemm::kCublasLt;
  // CUDA kernels that would otherwise add into one place with atomics, in an order that changes from run to
  // run, use a fixed order instead (slower): the recipe key train.deterministic.
  bool deterministic = false;
  // The Linears base_train's --fp8 filter accepts run their GEMMs in FP8 (model/fp8_linear.h): recipe
  // model.fp8.
  bool fp8 = false;

  // "attention flash, mlp gemm cublaslt, deterministic off, fp8 off".
  std::string describe() const;
};

}  // namespace nanoforge::ops
