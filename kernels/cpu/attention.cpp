// CPU causal sliding-window attention, blocked like FlashAttention but with GEMMs: for each (batch, head)
// and block of 64 queries, the scores against the keys the block can see come from one GEMM, are masked
// and softmaxed per row, and multiply V in a second GEMM. Only the band of keys within the window is ever
// touched, so short-window layers cost what their window says. The backward recomputes the probabilities
// from the saved log-sum-exp (no T x T matrix is kept) and runs one task per (batch, kv head), so the key
// and value gradients of a GQA group are summed by one thread in a fixed order. q, k, v and their gradients
// may be head slices of wider tensors: every GEMM takes its own leading dimension.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;

// Keys a block of queries can see: its own positions plus `window` before the first.
int64_t max_block_keys(int64_t seq, int64_t window) {
  return std::min(seq, window + kQueryBlock);
}

// Per thread: scores/probabilities and their gradient (block x keys each), and one value per query row.
int64_t workspace_elements_per_thread(int64_t seq, int64_t window) {
  return 2 * kQueryBlock * max_block_keys(seq, window) + kQueryBlock;
}

struct Shape {
  int64_t batch, seq, heads, kv_heads, head_dim, group;
};

Shape attention_shape(const HeadSlice& q, const HeadSlice& k, const HeadSlice& v, const TensorView& out,
                      const char* op) {
  check_same_shape(k, v, op);
  check_same_shape(q, out, op);
  Shape s{q.batch(), q.seq(), q.heads(), k.heads(), q.head_dim(), 0};
  NANOFORGE_CHECK(k.batch() == s.batch && k.seq() == s.seq && k.head_dim() == s.head_dim && s.kv_heads > 0 &&
                      s.heads % s.kv_heads == 0,
                  "{}: k {} does not match q {} (heads must be a multiple of kv heads)", op, k.describe(),
                  q.describe());
  s.group = s.heads / s.kv_heads;
  return s;
}

// The block of queries [t0, t0 + queries) and the keys [key0, key0 + keys) it can see.
struct Block {
  int64_t t0, queries, key0, keys;
};

Block query_block(int64_t index, int64_t seq, int64_t window) {
  Block block;
  block.t0 = index * kQueryBlock;
  block.queries = std::min(kQueryBlock, seq - block.t0);
  block.key0 = std::max<int64_t>(0, block.t0 - window);
  block.keys = block.t0 + block.queries - block.key0;
  return block;
}

// Visible key range of query row t (absolute), as local indices [lo, hi] into the block's keys.
inline void visible_keys(const Block& block, int64_t t, int64_t window, int64_t& lo, int64_t& hi) {
  lo = std::max<int64_t>(0, t - window) - block.key0;
  hi = t - block.key0;
}

int workspace_slots(const TensorView& workspace, int64_t per_thread, const char* op) {
  const int64_t slots = workspace.numel() / per_thread;
  NANOFORGE_CHECK(slots >= 1, "{}: workspace {} is smaller than one thread's {} elements", op,
                  workspace.describe(), per_thread);
  return static_cast<int>(std::min<int64_t>(slots, omp_get_max_threads()));
}

}  // namespace

int64_t attention_workspace_bytes(DType dtype, int64_t seq, int64_t window) {
  return omp_get_max_threads() * workspace_elements_per_thread(seq, window) * dtype_bytes(dtype);
}

template <class T>
void attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v, int64_t window,
                       double scale, TensorView workspace) {
  const Shape s = attention_shape(q, k, v, out, "attention_forward");
  NANOFORGE_CHECK(lse.numel() == s.batch * s.heads * s.seq, "attention_forward: lse {} must be ({}, {}, {})",
                  lse.describe(), s.batch, s.heads, s.seq);
  NANOFORGE_CHECK(window >= 0, "attention_forward: negative window {}", window);
  const int64_t per_thread = workspace_elements_per_thread(s.seq, window);
  const int threads = workspace_slots(workspace, per_thread, "attention_forward");
  const int64_t blocks = (s.seq + kQueryBlock - 1) / kQueryBlock;
  // Leading dimensions (elements from one position to the next) of each tensor: a slice's are its whole's.
  const int64_t q_stride = q.row_elements(), k_stride = k.row_elements(), v_stride = v.row_elements();
  const int64_t out_stride = s.heads * s.head_dim;
  const T* q_data = q.as<T>();
  const T* k_data = k.as<T>();
  const T* v_data = v.as<T>();
  T* out_data = out.as<T>();
  T* lse_data = lse.as<T>();

#pragma omp parallel num_threads(threads)
  {
    T* scores = workspace.as<T>() + omp_get_thread_num() * per_thread;
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        for (int64_t index = 0; index < blocks; ++index) {
          const Block block = query_block(index, s.seq, window);
          const int64_t kv_head = h / s.group;
          const T* q_block = q_data + (b * s.seq + block.t0) * q_stride + h * s.head_dim;
          const T* k_block = k_data + (b * s.seq + block.key0) * k_stride + kv_head * s.head_dim;
          const T* v_block = v_data + (b * s.seq + block.key0) * v_stride + kv_head * s.head_dim;
          gemm<T>(false, true, block.queries, block.keys, s.head_dim, static_cast<T>(scale), q_block,
                  q_stride, k_block, k_stride, T{0}, scores, block.keys);
          for (int64_t i = 0; i < block.queries; ++i) {
            const int64_t t = block.t0 + i;
            int64_t lo, hi;
            visible_keys(block, t, window, lo, hi);
            T* row = scores + i * block.keys;
            T max_score = -std::numeric_limits<T>::infinity();
            for (int64_t j = lo; j <= hi; ++j)
              max_score = std::max(max_score, row[j]);
            T sum = 0;
            for (int64_t j = 0; j < block.keys; ++j) {
              const T p = (j >= lo && j <= hi) ? std::exp(row[j] - max_score) : T{0};
              row[j] = p;
              sum += p;
            }
            const T inv_sum = T{1} / sum;
            for (int64_t j = lo; j <= hi; ++j)
              row[j] *= inv_sum;
            lse_data[(b * s.heads + h) * s.seq + t] = max_score + std::log(sum);
          }
          T* out_block = out_data + ((b * s.seq + block.t0) * s.heads + h) * s.head_dim;
          gemm<T>(false, false, block.queries, s.head_dim, block.keys, T{1}, scores, block.keys, v_block,
                  v_stride, T{0}, out_block, out_stride);
        }
      }
    }
  }
}

template <class T>
void attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                        HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace) {
  const Shape s = attention_shape(q, k, v, out, "attention_backward");
  check_same_shape(d_q, q, "attention_backward");
  check_same_shape(d_out, q, "attention_backward");
  check_same_shape(d_k, k, "attention_backward");
  check_same_shape(d_v, v, "attention_backward");
  const int64_t per_thread = workspace_elements_per_thread(s.seq, window);
  const int threads = workspace_slots(workspace, per_thread, "attention_backward");
  const int64_t blocks = (s.seq + kQueryBlock - 1) / kQueryBlock;
  const int64_t block_keys = max_block_keys(s.seq, window);
  // Leading dimensions (elements from one position to the next) of each tensor: a slice's are its whole's.
  const int64_t q_stride = q.row_elements(), k_stride = k.row_elements(), v_stride = v.row_elements();
  const int64_t d_q_stride = d_q.row_elements(), d_k_stride = d_k.row_elements();
  const int64_t d_v_stride = d_v.row_elements(), out_stride = s.heads * s.head_dim;
  const T* q_data = q.as<T>();
  const T* k_data = k.as<T>();
  const T* v_data = v.as<T>();
  const T* out_data = out.as<T>();
  const T* d_out_data = d_out.as<T>();
  const T* lse_data = lse.as<T>();
  T* d_q_data = d_q.as<T>();
  T* d_k_data = d_k.as<T>();
  T* d_v_data = d_v.as<T>();
  const T scale_t = static_cast<T>(scale);

#pragma omp parallel num_threads(threads)
  {
    T* probabilities = workspace.as<T>() + omp_get_thread_num() * per_thread;
    T* d_scores = probabilities + kQueryBlock * block_keys;
    T* out_dot = d_scores + kQueryBlock * block_keys;
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
        for (int64_t t = 0; t < s.seq; ++t) {
          std::fill_n(d_k_data + (b * s.seq + t) * d_k_stride + kv_head * s.head_dim, s.head_dim, T{0});
          std::fill_n(d_v_data + (b * s.seq + t) * d_v_stride + kv_head * s.head_dim, s.head_dim, T{0});
        }
        for (int64_t h = kv_head * s.group; h < (kv_head + 1) * s.group; ++h) {
          for (int64_t index = 0; index < blocks; ++index) {
            const Block block = query_block(index, s.seq, window);
            // Element offsets of the block's first query (head h) and first key (head kv_head) per tensor.
            const int64_t query_row = b * s.seq + block.t0, key_row = b * s.seq + block.key0;
            const int64_t q_offset = query_row * q_stride + h * s.head_dim;
            const int64_t d_q_offset = query_row * d_q_stride + h * s.head_dim;
            const int64_t out_offset = query_row * out_stride + h * s.head_dim;
            const int64_t k_offset = key_row * k_stride + kv_head * s.head_dim;
            const int64_t v_offset = key_row * v_stride + kv_head * s.head_dim;
            const int64_t d_k_offset = key_row * d_k_stride + kv_head * s.head_dim;
            const int64_t d_v_offset = key_row * d_v_stride + kv_head * s.head_dim;
            // Probabilities from the saved log-sum-exp.
            gemm<T>(false, true, block.queries, block.keys, s.head_dim, scale_t, q_data + q_offset, q_stride,
                    k_data + k_offset, k_stride, T{0}, probabilities, block.keys);
            for (int64_t i = 0; i < block.queries; ++i) {
              const int64_t t = block.t0 + i;
              int64_t lo, hi;
              visible_keys(block, t, window, lo, hi);
              const T row_lse = lse_data[(b * s.heads + h) * s.seq + t];
              T* row = probabilities + i * block.keys;
              for (int64_t j = 0; j < block.keys; ++j) {
                row[j] = (j >= lo && j <= hi) ? std::exp(row[j] - row_lse) : T{0};
              }
              const T* o = out_data + out_offset + i * out_stride;
              const T* d_o = d_out_data + out_offset + i * out_stride;
              T dot = 0;
              for (int64_t d = 0; d < s.head_dim; ++d)
                dot += o[d] * d_o[d];
              out_dot[i] = dot;
            }
            // dV += P^T dO
            gemm<T>(true, false, block.keys, s.head_dim, block.queries, T{1}, probabilities, block.keys,
                    d_out_data + out_offset, out_stride, T{1}, d_v_data + d_v_offset, d_v_stride);
            // dP = dO V^T, then dS = P * (dP - rowsum(dO * O))
            gemm<T>(false, true, block.queries, block.keys, s.head_dim, T{1}, d_out_data + out_offset,
                    out_stride, v_data + v_offset, v_stride, T{0}, d_scores, block.keys);
            for (int64_t i = 0; i < block.queries; ++i) {
              T* d_row = d_scores + i * block.keys;
              const T* p_row = probabilities + i * block.keys;
              for (int64_t j = 0; j < block.keys; ++j)
                d_row[j] = p_row[j] * (d_row[j] - out_dot[i]);
            }
            // dQ = scale dS K ; dK += scale dS^T Q
            gemm<T>(false, false, block.queries, s.head_dim, block.keys, scale_t, d_scores, block.keys,
                    k_data + k_offset, k_stride, T{0}, d_q_data + d_q_offset, d_q_stride);
            gemm<T>(true, false, block.keys, s.head_dim, block.queries, scale_t, d_scores, block.keys,
                    q_data + q_offset, q_stride, T{1}, d_k_data + d_k_offset, d_k_stride);
          }
        }
      }
    }
  }
}

NANOFORGE_CPU_INSTANTIATE(attention_forward);
NANOFORGE_CPU_INSTANTIATE(attention_backward);

}  // namespace nanoforge::cpu
