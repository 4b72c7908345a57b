// CPU token / value embedding lookup and its scatter-add backward. The backward splits the work by columns
// rather than by tokens: each thread owns a column range of the table and walks all tokens in order, so
// repeated ids never race and the sum order is fixed.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {
namespace {
constexpr int64_t kColumnsPerTask = 64;  // one cache line of doubles / two of floats per row touched
}

template <class T>
void embedding_forward(TensorView out, TensorView table, TensorView ids) {
  check_rank(table, 2, "embedding_forward", "table");
  const int64_t rows = ids.numel();
  const int64_t vocab = table.shape[0];
  const int64_t channels = table.shape[1];
  NANOFORGE_CHECK(out.numel() == rows * channels, "embedding_forward: out {} does not hold {} rows of {}",
                  out.describe(), rows, channels);
  const int32_t* id = ids.as<int32_t>();
  const T* weights = table.as<T>();
  T* result = out.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    NANOFORGE_CHECK(id[n] >= 0 && id[n] < vocab, "embedding_forward: id {} at row {} outside [0, {})", id[n],
                    n, vocab);
    std::memcpy(result + n * channels, weights + int64_t{id[n]} * channels, sizeof(T) * channels);
  }
}

template <class T>
void embedding_backward(TensorView d_table, TensorView d_out, TensorView ids) {
  check_rank(d_table, 2, "embedding_backward", "d_table");
  const int64_t rows = ids.numel();
  const int64_t vocab = d_table.shape[0];
  const int64_t channels = d_table.shape[1];
  NANOFORGE_CHECK(d_out.numel() == rows * channels,
                  "embedding_backward: d_out {} does not hold {} rows of {}", d_out.describe(), rows,
                  channels);
  const int32_t* id = ids.as<int32_t>();
  const T* grad = d_out.as<T>();
  T* table_grad = d_table.as<T>();
  const int64_t tasks = (channels + kColumnsPerTask - 1) / kColumnsPerTask;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t c0 = task * kColumnsPerTask;
    const int64_t c1 = std::min(channels, c0 + kColumnsPerTask);
    for (int64_t n = 0; n < rows; ++n) {
      NANOFORGE_CHECK(id[n] >= 0 && id[n] < vocab, "embedding_backward: id {} at row {} outside [0, {})",
                      id[n], n, vocab);
      T* dst = table_grad + int64_t{id[n]} * channels;
      const T* src = grad + n * channels;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  }
}

NANOFORGE_CPU_INSTANTIATE(embedding_forward);
NANOFORGE_CPU_INSTANTIATE(embedding_backward);

}  // namespace nanoforge::cpu
