// The CPU backend: the ops of kernels/op_list.inc, templated on the element type (float for training, double
// for gradient checks against finite differences), declared from the list. The dispatcher (kernels/ops.cpp)
// has checked devices and dtypes before these run. Each kernels/cpu/*.cpp ends with NANOFORGE_CPU_INSTANTIATE
// for the ops it defines (one without its definition does not compile); an op left out fails the link.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace nanoforge::cpu {

using ops::Accumulate;
using ops::Transpose;

#define NANOFORGE_OP(name, Return, params, args) \
  template <class T>                             \
  Return name params;
#define NANOFORGE_NO_CPU_TEMPLATE_OP(name, Return, params, args)
#include "kernels/op_list.inc"

// Written by hand: convert has a source and a destination type; the workspace size is no op.
template <class Dst, class Src>
void convert(TensorView dst, TensorView src);
int64_t attention_workspace_bytes(DType dtype, int64_t seq, int64_t window);

}  // namespace nanoforge::cpu

// The op's kernel for float and double (the signature is the declaration's), at the end of its file.
#define NANOFORGE_CPU_INSTANTIATE(op)     \
  template decltype(op<float>) op<float>; \
  template decltype(op<double>) op<double>
// The op's kernel for one more element type T (i32 fills and copies).
#define NANOFORGE_CPU_INSTANTIATE_FOR(op, T) template decltype(op<T>) op<T>
