// Rotary tables in fp32 arithmetic, as torch computes them (pow, outer product and cos/sin in float32), so
// an f64 model uses the very tables nanochat's fp32 model does.
#include "model/rotary_tables.h"

#include <cmath>

namespace nanoforge {

RotaryTables rotary_tables(int64_t positions, int64_t head_dim, double base) {
  const int64_t half = head_dim / 2;
  RotaryTables tables;
  tables.cos.resize(static_cast<size_t>(positions * half));
  tables.sin.resize(static_cast<size_t>(positions * half));
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    inv_freq[j] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  for (int64_t t = 0; t < positions; ++t) {
    for (int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(t) * inv_freq[j];
      tables.cos[t * half + j] = std::cos(angle);
      tables.sin[t * half + j] = std::sin(angle);
    }
  }
  return tables;
}

}  // namespace nanoforge
