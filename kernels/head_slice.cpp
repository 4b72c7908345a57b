// HeadSlice: construction (checked: rank 4, the heads inside the tensor) and its description for messages.
#include "kernels/head_slice.h"

#include <fmt/format.h>

namespace nanoforge {

namespace {

TensorView with_batch(const TensorView& t) {
  return t.rank == 3 ? t.reshaped({1, t.shape[0], t.shape[1], t.shape[2]}) : t;
}

}  // namespace

HeadSlice::HeadSlice(const TensorView& all_heads)
    : HeadSlice(with_batch(all_heads), 0, all_heads.rank >= 3 ? all_heads.dim(-2) : 0) {}

HeadSlice::HeadSlice(const TensorView& whole_, int64_t first_, int64_t count_)
    : whole(whole_), first(first_), count(count_) {
  NANOFORGE_CHECK(whole.rank == 4, "a head slice needs a (B, T, heads, D) tensor: {} must have rank 4",
                  whole.describe());
  NANOFORGE_CHECK(first >= 0 && count >= 0 && first + count <= whole.shape[2],
                  "heads [{}, {}) are not inside {}", first, first + count, whole.describe());
}

void check_same_shape(const HeadSlice& a, const HeadSlice& b, const char* op) {
  NANOFORGE_CHECK(
      a.batch() == b.batch() && a.seq() == b.seq() && a.heads() == b.heads() && a.head_dim() == b.head_dim(),
      "{}: shapes differ: {} vs {}", op, a.describe(), b.describe());
}

std::string HeadSlice::describe() const {
  if (dense()) return whole.describe();
  return fmt::format("heads [{}, {}) of {}", first, first + count, whole.describe());
}

}  // namespace nanoforge
