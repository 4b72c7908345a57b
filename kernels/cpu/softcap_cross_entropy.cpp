// CPU logit softcap fused with cross-entropy. The forward caps the logits in place (z = c tanh(l / c)) and
// keeps each row's log-sum-exp; because |z| <= c, the exponentials are shifted by c instead of by a row
// maximum, which saves a pass and cannot overflow. The forward-backward then overwrites each row's capped
// logits with their gradient right away, while the row is in cache, so the (N, V) logits buffer is the only
// vocabulary-sized tensor; per row it is the arithmetic the separate backward op did (the same bits).
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

// Caps one row of logits in place (z = cap tanh(l / cap)) and returns its log-sum-exp.
template <class T>
T cap_row(T* row, int64_t vocab, T cap, T inv_cap) {
  T sum = 0;
  for (int64_t j = 0; j < vocab; ++j) {
    row[j] = cap * std::tanh(row[j] * inv_cap);
    sum += std::exp(row[j] - cap);
  }
  return cap + std::log(sum);
}

// The gradient of scale * (lse - z[target]) with respect to the raw logits, over the row's capped logits z
// (in place: the target's z is read first).
template <class T>
void gradient_row(T* row, int64_t vocab, int32_t target, T lse, T inv_cap, T scale) {
  if (target == kIgnoreIndex) {
    for (int64_t j = 0; j < vocab; ++j)
      row[j] = 0;
    return;
  }
  const T target_capped = row[target] * inv_cap;
  for (int64_t j = 0; j < vocab; ++j) {
    const T capped = row[j] * inv_cap;
    row[j] = scale * std::exp(row[j] - lse) * (T{1} - capped * capped);
  }
  row[target] -= scale * (T{1} - target_capped * target_capped);
}

// The forward over every row, and (with a gradient scale) each row's gradient right after its forward.
template <class T>
void softcap_rows(TensorView losses, TensorView lse, TensorView logits, TensorView targets, double softcap,
                  const double* grad_scale, const char* op) {
  check_loss_shapes(logits, targets, losses, softcap, op);
  NANOFORGE_CHECK(lse.numel() == logits.shape[0], "{}: lse {} needs {} rows", op, lse.describe(),
                  logits.shape[0]);
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  const T cap = static_cast<T>(softcap), inv_cap = static_cast<T>(1.0 / softcap);
  const T scale = grad_scale != nullptr ? static_cast<T>(*grad_scale) : T{0};
  T* z = logits.as<T>();
  const int32_t* target = targets.as<int32_t>();
  T* loss = losses.as<T>();
  T* row_lse = lse.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    NANOFORGE_CHECK(target[n] == kIgnoreIndex || (target[n] >= 0 && target[n] < vocab),
                    "{}: target {} at row {} outside [0, {}) and not -1", op, target[n], n, vocab);
    T* row = z + n * vocab;
    row_lse[n] = cap_row(row, vocab, cap, inv_cap);
    loss[n] = target[n] == kIgnoreIndex ? T{0} : row_lse[n] - row[target[n]];
    if (grad_scale != nullptr) gradient_row(row, vocab, target[n], row_lse[n], inv_cap, scale);
  }
}

}  // namespace

template <class T>
void softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                   double softcap) {
  softcap_rows<T>(losses, lse, logits, targets, softcap, nullptr, "softcap_cross_entropy_forward");
}

template <class T>
void softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                            TensorView targets, double softcap, double loss_scale) {
  const int32_t* target = targets.as<int32_t>();
  int64_t valid = 0;
  for (int64_t n = 0; n < targets.numel(); ++n)
    valid += target[n] != kIgnoreIndex ? 1 : 0;
  const double grad_scale = valid > 0 ? loss_scale / static_cast<double>(valid) : 0.0;
  softcap_rows<T>(losses, lse, logits, targets, softcap, &grad_scale,
                  "softcap_cross_entropy_forward_backward");
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

NANOFORGE_CPU_INSTANTIATE(softcap_cross_entropy_forward);
NANOFORGE_CPU_INSTANTIATE(softcap_cross_entropy_forward_backward);
NANOFORGE_CPU_INSTANTIATE(sum_loss);

}  // namespace nanoforge::cpu
