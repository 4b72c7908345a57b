// CPU smear: each token gets lambda * sigmoid(gate . its first G channels) times the previous token's
// normalised embedding. The backward computes each row's input gradient in the same pass that sums the
// gate-weight and lambda gradients (ordered_sums, so the sums do not depend on the thread count).
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/ordered_sums.h"
#include "kernels/cpu/sigmoid.h"

namespace nanoforge::cpu {
namespace {

struct SmearShape {
  int64_t batch, seq, channels, gate_channels;
};

SmearShape smear_shape(const TensorView& x, const TensorView& gate_weight, const TensorView& lambda,
                       const TensorView& gate_sigmoid, const char* op) {
  check_rank(x, 3, op, "x");
  SmearShape s{x.shape[0], x.shape[1], x.shape[2], gate_weight.numel()};
  NANOFORGE_CHECK(s.gate_channels <= s.channels, "{}: gate reads {} channels of {}", op, s.gate_channels,
                  s.channels);
  NANOFORGE_CHECK(lambda.numel() == 1, "{}: lambda must have one element, got {}", op, lambda.describe());
  NANOFORGE_CHECK(gate_sigmoid.numel() == s.batch * s.seq, "{}: gate_sigmoid {} must be ({}, {})", op,
                  gate_sigmoid.describe(), s.batch, s.seq);
  return s;
}

}  // namespace

template <class T>
void smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView gate_weight,
                   TensorView lambda) {
  const SmearShape s = smear_shape(x, gate_weight, lambda, gate_sigmoid, "smear_forward");
  check_same_shape(out, x, "smear_forward");
  NANOFORGE_CHECK(out.data != x.data, "smear_forward: out must not alias x");
  const T* in = x.as<T>();
  const T* w = gate_weight.as<T>();
  const T lam = *lambda.as<T>();
  T* result = out.as<T>();
  T* sig = gate_sigmoid.as<T>();
  const int64_t C = s.channels;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t t = 0; t < s.seq; ++t) {
      const int64_t row = b * s.seq + t;
      const T* xt = in + row * C;
      T* dst = result + row * C;
      if (t == 0) {
        sig[row] = 0;
        for (int64_t c = 0; c < C; ++c)
          dst[c] = xt[c];
        continue;
      }
      T pre = 0;
      for (int64_t j = 0; j < s.gate_channels; ++j)
        pre += xt[j] * w[j];
      sig[row] = sigmoid(pre);
      const T gate = lam * sig[row];
      const T* prev = xt - C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        dst[c] = xt[c] + gate * prev[c];
    }
  }
}

template <class T>
void smear_backward(TensorView d_x, TensorView d_gate_weight, TensorView d_lambda, TensorView d_out,
                    TensorView x, TensorView gate_sigmoid, TensorView gate_weight, TensorView lambda) {
  const SmearShape s = smear_shape(x, gate_weight, lambda, gate_sigmoid, "smear_backward");
  check_same_shape(d_x, x, "smear_backward");
  check_same_shape(d_out, x, "smear_backward");
  NANOFORGE_CHECK(d_gate_weight.numel() == s.gate_channels && d_lambda.numel() == 1,
                  "smear_backward: parameter gradients {} / {} do not match", d_gate_weight.describe(),
                  d_lambda.describe());
  const T* in = x.as<T>();
  const T* grad = d_out.as<T>();
  const T* w = gate_weight.as<T>();
  const T* sig = gate_sigmoid.as<T>();
  const T lam = *lambda.as<T>();
  T* result = d_x.as<T>();
  const int64_t C = s.channels, G = s.gate_channels, seq = s.seq;
  const int values = static_cast<int>(G) + 1;  // gate weight gradients, then lambda's

  // d(pre-activation of the gate) at row (b, t), t >= 1.
  auto gate_pre_grad = [&](int64_t row, T& d_gate) {
    const T* g = grad + row * C;
    const T* prev = in + (row - 1) * C;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < C; ++c)
      dot += g[c] * prev[c];
    d_gate = dot;
    return dot * lam * sig[row] * (T{1} - sig[row]);
  };

  double totals[kOrderedSumMaxValues];
  ordered_sums(s.batch * seq, values, totals, [&](int64_t begin, int64_t end, double* partial) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t t = row % seq;
      const T* g = grad + row * C;
      T* dst = result + row * C;
      // Identity path, plus the path through the next token's smear.
      if (t + 1 < seq) {
        const T next_gate = lam * sig[row + 1];
        const T* g_next = g + C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          dst[c] = g[c] + next_gate * g_next[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          dst[c] = g[c];
      }
      if (t == 0) continue;
      T d_gate;
      const T d_pre = gate_pre_grad(row, d_gate);
      const T* xt = in + row * C;
      for (int64_t j = 0; j < G; ++j) {
        dst[j] += d_pre * w[j];
        partial[j] += static_cast<double>(d_pre * xt[j]);
      }
      partial[G] += static_cast<double>(d_gate * sig[row]);
    }
  });
  T* d_w = d_gate_weight.as<T>();
  for (int64_t j = 0; j < G; ++j)
    d_w[j] += static_cast<T>(totals[j]);
  *d_lambda.as<T>() += static_cast<T>(totals[G]);
}

NANOFORGE_CPU_INSTANTIATE(smear_forward);
NANOFORGE_CPU_INSTANTIATE(smear_backward);

}  // namespace nanoforge::cpu
