// The ops of kernels/ops.h that the CUDA backend implements so far (the rest arrive with the CUDA backend
// issue; kernels/ops.cpp reports a missing one by name). Activations are bf16 with fp32 accumulation;
// per-row statistics (rstd) are fp32. Contracts are those of kernels/ops.h.
#pragma once

#include "kernels/ops.h"

namespace nanoforge::cuda {

void fill(TensorView t, double value);
void copy(TensorView dst, TensorView src);
void accumulate(TensorView into, TensorView add);

void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale);
void rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                      ops::Accumulate mode);

}  // namespace nanoforge::cuda
