// CPU value embeddings with nanochat's gate: v += 3 * sigmoid(u[:, :G] @ W^T) * table[ids] per kv head.
// The backward has two passes: one over tokens that computes the gate gradient, the gradient of u and the
// gate-weight sums (ordered, thread-count independent), and a column-split scatter into the table gradient
// that walks tokens in order, as the embedding backward does. v (and d_v) may be the v heads of the fused
// projection's output: each token's heads are contiguous, tokens row_elements() apart.
#include <algorithm>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/ordered_sums.h"
#include "kernels/cpu/sigmoid.h"

namespace nanoforge::cpu {
namespace {

constexpr double kGateRange = 3.0;  // nanochat: gate = 3 * sigmoid(...), in (0, 3)
constexpr int64_t kColumnsPerTask = 64;

struct GateShape {
  int64_t rows, kv_heads, head_dim, channels, gate_channels, vocab;
  int64_t v_row;  // elements from one token's v heads to the next's (v may be a slice of a wider tensor)
};

GateShape gate_shape(const HeadSlice& v, const TensorView& gate_sigmoid, const TensorView& u,
                     const TensorView& gate_weight, const TensorView& table, const TensorView& ids,
                     const char* op) {
  check_rank(gate_weight, 2, op, "gate_weight");
  check_rank(table, 2, op, "table");
  GateShape s{v.batch() * v.seq(),  v.heads(),      v.head_dim(),    u.dim(-1),
              gate_weight.shape[1], table.shape[0], v.row_elements()};
  NANOFORGE_CHECK(gate_weight.shape[0] == s.kv_heads && table.shape[1] == s.kv_heads * s.head_dim &&
                      u.numel() == s.rows * s.channels && ids.numel() == s.rows &&
                      gate_sigmoid.numel() == s.rows * s.kv_heads && s.gate_channels <= s.channels,
                  "{}: inconsistent shapes v {}, gate_weight {}, table {}, u {}, ids {}, gate_sigmoid {}", op,
                  v.describe(), gate_weight.describe(), table.describe(), u.describe(), ids.describe(),
                  gate_sigmoid.describe());
  return s;
}

}  // namespace

template <class T>
void value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                              TensorView table, TensorView ids) {
  const GateShape s = gate_shape(v, gate_sigmoid, u, gate_weight, table, ids, "value_embed_gate_forward");
  const T* in = u.as<T>();
  const T* w = gate_weight.as<T>();
  const T* embeddings = table.as<T>();
  const int32_t* id = ids.as<int32_t>();
  T* values = v.as<T>();
  T* sig = gate_sigmoid.as<T>();
  const int64_t width = s.kv_heads * s.head_dim;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < s.rows; ++n) {
    NANOFORGE_CHECK(id[n] >= 0 && id[n] < s.vocab,
                    "value_embed_gate_forward: id {} at row {} outside [0, {})", id[n], n, s.vocab);
    const T* un = in + n * s.channels;
    const T* embedding = embeddings + int64_t{id[n]} * width;
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      T pre = 0;
      for (int64_t j = 0; j < s.gate_channels; ++j)
        pre += un[j] * w[h * s.gate_channels + j];
      sig[n * s.kv_heads + h] = sigmoid(pre);
      const T gate = static_cast<T>(kGateRange) * sig[n * s.kv_heads + h];
      T* dst = values + n * s.v_row + h * s.head_dim;
      const T* src = embedding + h * s.head_dim;
#pragma omp simd
      for (int64_t d = 0; d < s.head_dim; ++d)
        dst[d] += gate * src[d];
    }
  }
}

template <class T>
void value_embed_gate_backward(TensorView d_u, TensorView d_gate_weight, TensorView d_table, HeadSlice d_v,
                               TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                               TensorView table, TensorView ids) {
  const GateShape s = gate_shape(d_v, gate_sigmoid, u, gate_weight, table, ids, "value_embed_gate_backward");
  check_same_shape(d_u, u, "value_embed_gate_backward");
  check_same_shape(d_table, table, "value_embed_gate_backward");
  check_same_shape(d_gate_weight, gate_weight, "value_embed_gate_backward");
  const T* in = u.as<T>();
  const T* w = gate_weight.as<T>();
  const T* embeddings = table.as<T>();
  const T* grad = d_v.as<T>();
  const T* sig = gate_sigmoid.as<T>();
  const int32_t* id = ids.as<int32_t>();
  T* d_in = d_u.as<T>();
  const int64_t width = s.kv_heads * s.head_dim, G = s.gate_channels;
  const T range = static_cast<T>(kGateRange);

  double totals[kOrderedSumMaxValues];
  ordered_sums(s.rows, static_cast<int>(s.kv_heads * G), totals,
               [&](int64_t begin, int64_t end, double* partial) {
                 for (int64_t n = begin; n < end; ++n) {
                   const T* embedding = embeddings + int64_t{id[n]} * width;
                   const T* un = in + n * s.channels;
                   T* d_un = d_in + n * s.channels;
                   for (int64_t h = 0; h < s.kv_heads; ++h) {
                     const T* g = grad + n * s.v_row + h * s.head_dim;
                     const T* e = embedding + h * s.head_dim;
                     T d_gate = 0;
#pragma omp simd reduction(+ : d_gate)
                     for (int64_t d = 0; d < s.head_dim; ++d)
                       d_gate += g[d] * e[d];
                     const T p = sig[n * s.kv_heads + h];
                     const T d_pre = d_gate * range * p * (T{1} - p);
                     for (int64_t j = 0; j < G; ++j) {
                       d_un[j] += d_pre * w[h * G + j];
                       partial[h * G + j] += static_cast<double>(d_pre * un[j]);
                     }
                   }
                 }
               });
  T* d_w = d_gate_weight.as<T>();
  for (int64_t i = 0; i < s.kv_heads * G; ++i)
    d_w[i] += static_cast<T>(totals[i]);

  T* d_embeddings = d_table.as<T>();
  const int64_t tasks = (width + kColumnsPerTask - 1) / kColumnsPerTask;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t c0 = task * kColumnsPerTask, c1 = std::min(width, c0 + kColumnsPerTask);
    for (int64_t n = 0; n < s.rows; ++n) {
      T* dst = d_embeddings + int64_t{id[n]} * width;
      const T* g = grad + n * s.v_row;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += range * sig[n * s.kv_heads + c / s.head_dim] * g[c];
    }
  }
}

NANOFORGE_CPU_INSTANTIATE(value_embed_gate_forward);
NANOFORGE_CPU_INSTANTIATE(value_embed_gate_backward);

}  // namespace nanoforge::cpu
