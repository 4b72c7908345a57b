// Moving values between host arrays and tensors of any dtype and device, converting on the way: weights
// read from files (f32) into an f64 model, gradients out to a result file, token ids (int64 in files) into
// i32 tensors. For setup and inspection, not for the training step.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace nanoforge {

// dst (any dtype, any device) = src[0 .. dst.numel()), converted. Host is float, double, int32_t or int64_t.
template <class Host>
void upload(TensorView dst, const Host* src);

// The tensor's values, converted to Host.
template <class Host>
std::vector<Host> download(TensorView src);

}  // namespace nanoforge
