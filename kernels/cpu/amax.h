// The tensorwise amax of FP8 training on the CPU: max |x| in fp32 over a block of columns (fp8.py's
// x.float().abs().max()), taken by fp8_quantize and by the ops that produce an FP8 GEMM's input
// (kernels/fp8_amax.h). A max gives the same bits in any thread order; a NaN anywhere makes it NaN, as
// torch's max does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {

// max |x[r, first + c]| over r < rows, c < cols of a row-major matrix with `stride` elements per row.
template <class T>
float column_block_amax(const T* x, int64_t rows, int64_t stride, int64_t first, int64_t cols) {
  float amax = 0.0f;
  bool nan = false;
#pragma omp parallel for reduction(max : amax) reduction(|| : nan) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = std::fabs(static_cast<float>(x[r * stride + first + c]));
      nan = nan || std::isnan(v);
      amax = std::max(amax, v);
    }
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : amax;
}

// amax = max |out| over all of out, when wanted: the fused amax of an op that produced out.
template <class T>
void write_amax(const ops::AmaxOutput& amax, const TensorView& out) {
  if (!amax.wanted()) return;
  NANOFORGE_CHECK(amax.value.dtype == DType::kF32 && amax.value.numel() == 1,
                  "amax output {} must be one f32", amax.value.describe());
  const int64_t width = out.rank > 0 ? out.dim(-1) : 1;
  const int64_t rows = width > 0 ? out.numel() / width : 0;
  *amax.value.as<float>() = column_block_amax(out.as<T>(), rows, width, 0, width);
}

}  // namespace nanoforge::cpu
