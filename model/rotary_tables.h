// nanochat's rotary tables, computed the way its _precompute_rotary_embeddings does in fp32:
// inv_freq[j] = 1 / base^(2j / D), angle = t * inv_freq[j], then cos and sin. Computed once per model.
#pragma once

#include <cstdint>
#include <vector>

namespace nanoforge {

struct RotaryTables {
  std::vector<float> cos;  // (positions, head_dim / 2), row-major
  std::vector<float> sin;
};

RotaryTables rotary_tables(int64_t positions, int64_t head_dim, double base);

}  // namespace nanoforge
