// CPU kernels for the elementwise and norm steps of nanochat's Muon (the Polar Express matrix products go
// through matmul): Nesterov momentum, MuonEq row equilibration, Frobenius (re)normalisation, NorMuon's
// variance reduction and the cautious-weight-decay update, and squared_norm for the global gradient norm.
// Norms are ordered sums (thread-count independent), accumulated in double.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/ordered_sums.h"

namespace nanoforge::cpu {
namespace {

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  double total;
  ordered_sums(n, 1, &total, [&](int64_t begin, int64_t end, double* partial) {
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = begin; i < end; ++i)
      sum += static_cast<double>(x[i]) * x[i];
    partial[0] += sum;
  });
  return total;
}

}  // namespace

template <class T>
void muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad, double momentum) {
  check_same_shape(update, grad, "muon_nesterov_momentum");
  check_same_shape(momentum_buffer, grad, "muon_nesterov_momentum");
  const T mu = static_cast<T>(momentum), one_minus_mu = static_cast<T>(1.0 - momentum);
  T* out = update.as<T>();
  T* m = momentum_buffer.as<T>();
  const T* g = grad.as<T>();
  const int64_t n = grad.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    m[i] += one_minus_mu * (gi - m[i]);
    out[i] = gi + mu * (m[i] - gi);
  }
}

template <class T>
void muon_equilibrate_rows(TensorView x) {
  check_rank(x, 2, "muon_equilibrate_rows", "x");
  const int64_t rows = x.shape[0], cols = x.shape[1];
  T* data = x.as<T>();
  const double target = std::sqrt(sum_of_squares(data, x.numel())) / std::sqrt(static_cast<double>(rows));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = data + r * cols;
    double squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t c = 0; c < cols; ++c)
      squares += static_cast<double>(row[c]) * row[c];
    const T factor =
        static_cast<T>(target / std::max(std::sqrt(squares), 1e-6));  // nanochat's row-norm floor
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      row[c] *= factor;
  }
}

template <class T>
void normalize_frobenius(TensorView x, double multiplier, double eps) {
  T* data = x.as<T>();
  const int64_t n = x.numel();
  const T factor = static_cast<T>(1.0 / (std::sqrt(sum_of_squares(data, n)) * multiplier + eps));
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    data[i] *= factor;
}

template <class T>
void rescale_frobenius(TensorView x, double target_norm, double eps) {
  T* data = x.as<T>();
  const int64_t n = x.numel();
  const T factor = static_cast<T>(target_norm / std::max(std::sqrt(sum_of_squares(data, n)), eps));
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    data[i] *= factor;
}

template <class T>
void normuon_variance_reduce(TensorView g, TensorView second_moment, double beta2) {
  check_rank(g, 2, "normuon_variance_reduce", "g");
  const int64_t rows = g.shape[0], cols = g.shape[1];
  const bool per_row =
      second_moment.numel() == rows && (second_moment.rank < 2 || second_moment.dim(-1) == 1);
  NANOFORGE_CHECK(per_row || second_moment.numel() == cols,
                  "normuon_variance_reduce: second moment {} fits neither ({}, 1) nor (1, {})",
                  second_moment.describe(), rows, cols);
  T* data = g.as<T>();
  T* state = second_moment.as<T>();
  const int64_t groups = per_row ? rows : cols;   // one statistic per row or per column
  const int64_t reduced = per_row ? cols : rows;  // N: the size of the reduced dimension
  auto element = [&](int64_t group, int64_t k) -> T& {
    return per_row ? data[group * cols + k] : data[k * cols + group];
  };
  // Sum of squares of every group (the mean is sum / N).
  double norm_squared = 0, new_norm_squared = 0;
  for (int64_t group = 0; group < groups; ++group) {
    double squares = 0;
    for (int64_t k = 0; k < reduced; ++k)
      squares += static_cast<double>(element(group, k)) * element(group, k);
    const T mean = static_cast<T>(squares / static_cast<double>(reduced));
    state[group] += static_cast<T>(1.0 - beta2) * (mean - state[group]);
    const double step = 1.0 / std::sqrt(std::max(static_cast<double>(state[group]), 1e-10));
    norm_squared += squares;
    new_norm_squared += squares * step * step;
  }
  const double rescale = std::sqrt(norm_squared) / std::max(std::sqrt(new_norm_squared), 1e-10);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t group = per_row ? r : c;
      const double step = 1.0 / std::sqrt(std::max(static_cast<double>(state[group]), 1e-10));
      data[r * cols + c] = static_cast<T>(data[r * cols + c] * step * rescale);
    }
  }
}

template <class T>
void cautious_weight_decay_step(TensorView param, TensorView update, double lr, double weight_decay) {
  check_same_shape(param, update, "cautious_weight_decay_step");
  T* p = param.as<T>();
  const T* u = update.as<T>();
  const T rate = static_cast<T>(lr), decay = static_cast<T>(lr * weight_decay);
  const int64_t n = param.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T mask = u[i] * p[i] >= T{0} ? T{1} : T{0};
    p[i] = p[i] - rate * u[i] - decay * p[i] * mask;
  }
}

template <class T>
double squared_norm(TensorView x) {
  return sum_of_squares(x.as<T>(), x.numel());
}

NANOFORGE_CPU_INSTANTIATE(muon_nesterov_momentum);
NANOFORGE_CPU_INSTANTIATE(muon_equilibrate_rows);
NANOFORGE_CPU_INSTANTIATE(normalize_frobenius);
NANOFORGE_CPU_INSTANTIATE(rescale_frobenius);
NANOFORGE_CPU_INSTANTIATE(normuon_variance_reduce);
NANOFORGE_CPU_INSTANTIATE(cautious_weight_decay_step);
NANOFORGE_CPU_INSTANTIATE(squared_norm);

}  // namespace nanoforge::cpu
