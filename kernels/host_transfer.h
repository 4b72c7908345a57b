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

// The same into an existing vector (resized; no reallocation when it already has the room), a plain copy
// when the tensor holds Host values: for snapshots that are taken again and again.
template <class Host>
void download_into(TensorView src, std::vector<Host>& out);

}  // namespace nanoforge
