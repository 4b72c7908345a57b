// CPU logit softcap fused with cross-entropy. The forward caps the logits in place (z = c tanh(l / c)) and
// keeps each row's log-sum-exp; because |z| <= c, the exponentials are shifted by c instead of by a row
// maximum, which saves a pass and cannot overflow. The backward overwrites the capped logits with their
// gradient, so the (N, V) logits buffer is the only vocabulary-sized tensor.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/ordered_sums.h"

namespace nanoforge::cpu {
namespace {

constexpr int32_t kIgnoreIndex = -1;  // nanochat's F.cross_entropy(ignore_index=-1)

void check_loss_shapes(const TensorView& logits, const TensorView& targets, const TensorView& per_row,
                       double softcap, const char* op) {
  check_rank(logits, 2, op, "logits");
  NANOFORGE_CHECK(targets.numel() == logits.shape[0] && per_row.numel() == logits.shape[0],
                  "{}: targets {} and per-row {} must have one entry per logits row {}", op,
                  targets.describe(), per_row.describe(), logits.describe());
  NANOFORGE_CHECK(softcap > 0, "{}: softcap must be positive, got {}", op, softcap);
}

}  // namespace

template <class T>
void softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                   double softcap) {
  check_loss_shapes(logits, targets, losses, softcap, "softcap_cross_entropy_forward");
  NANOFORGE_CHECK(lse.numel() == logits.shape[0], "softcap_cross_entropy_forward: lse {} needs {} rows",
                  lse.describe(), logits.shape[0]);
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  const T cap = static_cast<T>(softcap), inv_cap = static_cast<T>(1.0 / softcap);
  T* z = logits.as<T>();
  const int32_t* target = targets.as<int32_t>();
  T* loss = losses.as<T>();
  T* row_lse = lse.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    NANOFORGE_CHECK(target[n] == kIgnoreIndex || (target[n] >= 0 && target[n] < vocab),
                    "softcap_cross_entropy_forward: target {} at row {} outside [0, {}) and not -1",
                    target[n], n, vocab);
    T* row = z + n * vocab;
    T sum = 0;
    for (int64_t j = 0; j < vocab; ++j) {
      row[j] = cap * std::tanh(row[j] * inv_cap);
      sum += std::exp(row[j] - cap);
    }
    row_lse[n] = cap + std::log(sum);
    loss[n] = target[n] == kIgnoreIndex ? T{0} : row_lse[n] - row[target[n]];
  }
}

template <class T>
void softcap_cross_entropy_backward(TensorView d_logits, TensorView logits_capped, TensorView lse,
                                    TensorView targets, double softcap, double grad_scale) {
  check_loss_shapes(logits_capped, targets, lse, softcap, "softcap_cross_entropy_backward");
  check_same_shape(d_logits, logits_capped, "softcap_cross_entropy_backward");
  const int64_t rows = logits_capped.shape[0], vocab = logits_capped.shape[1];
  const T inv_cap = static_cast<T>(1.0 / softcap), scale = static_cast<T>(grad_scale);
  const T* z = logits_capped.as<T>();
  const T* row_lse = lse.as<T>();
  const int32_t* target = targets.as<int32_t>();
  T* grad = d_logits.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* zr = z + n * vocab;
    T* gr = grad + n * vocab;
    if (target[n] == kIgnoreIndex) {
      for (int64_t j = 0; j < vocab; ++j)
        gr[j] = 0;
      continue;
    }
    const T l = row_lse[n];
    const T target_capped = zr[target[n]] * inv_cap;  // read before d_logits (which may alias) overwrites it
    for (int64_t j = 0; j < vocab; ++j) {
      const T capped = zr[j] * inv_cap;
      gr[j] = scale * std::exp(zr[j] - l) * (T{1} - capped * capped);
    }
    gr[target[n]] -= scale * (T{1} - target_capped * target_capped);
  }
}

template <class T>
ops::LossSum sum_loss(TensorView losses, TensorView targets) {
  NANOFORGE_CHECK(losses.numel() == targets.numel(), "sum_loss: losses {} and targets {} differ in length",
                  losses.describe(), targets.describe());
  const T* loss = losses.as<T>();
  const int32_t* target = targets.as<int32_t>();
  double totals[2];
  ordered_sums(losses.numel(), 2, totals, [&](int64_t begin, int64_t end, double* partial) {
    for (int64_t n = begin; n < end; ++n) {
      if (target[n] == kIgnoreIndex) continue;
      partial[0] += static_cast<double>(loss[n]);
      partial[1] += 1;
    }
  });
  return {totals[0], static_cast<int64_t>(totals[1])};
}

template void softcap_cross_entropy_forward<float>(TensorView, TensorView, TensorView, TensorView, double);
template void softcap_cross_entropy_forward<double>(TensorView, TensorView, TensorView, TensorView, double);
template void softcap_cross_entropy_backward<float>(TensorView, TensorView, TensorView, TensorView, double,
                                                    double);
template void softcap_cross_entropy_backward<double>(TensorView, TensorView, TensorView, TensorView, double,
                                                     double);
template ops::LossSum sum_loss<float>(TensorView, TensorView);
template ops::LossSum sum_loss<double>(TensorView, TensorView);

}  // namespace nanoforge::cpu
