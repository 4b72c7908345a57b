// HeadSlice: heads [first, first + count) of every position of a (B, T, heads, D) tensor. It is how the
// attention ops and the passes around them (rotary with the QK-norm, the value-embedding gate) read and write
// q, k and v inside the fused projection's (B, T, 2 Hkv + H, D) output, and their gradients inside its
// gradient, without copying them out: a head of a slice is D contiguous elements, consecutive positions are
// row_heads() heads apart. A plain (B, T, heads, D) tensor converts to the slice of all its heads, and so
// does a (tokens, heads, D) one, as (1, tokens, heads, D).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tensor.h"

namespace nanoforge {

struct HeadSlice {
  TensorView whole;  // (B, T, row_heads, D)
  int64_t first = 0, count = 0;

  HeadSlice(const TensorView& all_heads);  // NOLINT(google-explicit-constructor): every dense tensor is one
  HeadSlice(const TensorView& whole, int64_t first, int64_t count);

  int64_t batch() const { return whole.shape[0]; }
  int64_t seq() const { return whole.shape[1]; }
  int64_t heads() const { return count; }
  int64_t head_dim() const { return whole.shape[3]; }
  int64_t row_heads() const { return whole.shape[2]; }
  int64_t row_elements() const { return row_heads() * head_dim(); }  // from one position to the next
  DType dtype() const { return whole.dtype; }
  Device device() const { return whole.device; }
  // Element 0 of head `first` at position 0.
  void* data() const {
    return static_cast<char*>(whole.data) + first * head_dim() * dtype_bytes(whole.dtype);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }
  // Whether the slice is its whole tensor (then whole is the dense (B, T, heads, D) view of it).
  bool dense() const { return count == row_heads(); }
  std::string describe() const;  // "heads [2, 4) of bf16[2, 16, 4, 8] on cuda"
};

// Same (B, T, heads, D) for two slices (or a slice and a dense tensor), wherever their heads lie.
void check_same_shape(const HeadSlice& a, const HeadSlice& b, const char* op);

}  // namespace nanoforge
