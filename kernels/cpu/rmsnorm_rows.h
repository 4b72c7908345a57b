// RMSNorm of one row, forward and backward, shared by the plain norm (rmsnorm.cpp) and the fused passes that
// end or start with one (residual_mix_rmsnorm.cpp, rotary_rmsnorm.cpp): one definition, so a fused op does
// exactly the arithmetic of the unfused sequence and the CPU results keep their bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

namespace nanoforge::cpu {

// dst = row * (rstd * factor) with rstd = 1 / sqrt(mean(row^2) + eps), returned. dst may be row.
template <class T>
inline T rmsnorm_row_forward(T* dst, const T* row, int64_t width, T factor) {
  T sum_squares = 0;
#pragma omp simd reduction(+ : sum_squares)
  for (int64_t c = 0; c < width; ++c)
    sum_squares += row[c] * row[c];
  const T inv =
      static_cast<T>(1) / std::sqrt(sum_squares / static_cast<T>(width) + static_cast<T>(ops::kRmsNormEps));
  const T multiplier = inv * factor;
#pragma omp simd
  for (int64_t c = 0; c < width; ++c)
    dst[c] = row[c] * multiplier;
  return inv;
}

// dst (+)= rstd * factor * g - rstd * y * mean(g * y) / factor, for the row's gradient g, output y and rstd
// `inv`. dst may be g when add is false.
template <class T>
inline void rmsnorm_row_backward(T* dst, const T* g, const T* y, T inv, int64_t width, T factor, bool add) {
  T dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t c = 0; c < width; ++c)
    dot += g[c] * y[c];
  const T projection = dot / static_cast<T>(width) / factor;
  const T g_scale = inv * factor;
  if (add) {
#pragma omp simd
    for (int64_t c = 0; c < width; ++c)
      dst[c] += g_scale * g[c] - inv * y[c] * projection;
  } else {
#pragma omp simd
    for (int64_t c = 0; c < width; ++c)
      dst[c] = g_scale * g[c] - inv * y[c] * projection;
  }
}

}  // namespace nanoforge::cpu
