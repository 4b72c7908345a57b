// adamw_step and muon_step. The Polar Express iterations use two GEMMs per product: A = X X^T (or X^T X for
// tall X), B = b A + c A A, X' = a X + B X (or X B); beta carries the linear terms so no extra pass runs. On
// the GPU the momentum step writes the update straight into the bf16 scratch from the fp32 state, and the
// cautious step applies it to the fp32 parameter, so the bf16 rounding is the orthogonalisation's only.
#include "optim/optimizer_steps.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace nanoforge {
namespace {

using ops::Transpose;

// The (rows, cols) prefix of a 1-D scratch buffer.
TensorView matrix(TensorView scratch, int64_t rows, int64_t cols) {
  return scratch.rows(0, rows * cols).reshaped({rows, cols});
}

}  // namespace

void adamw_step(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                const ParamGroup& group, double lr, int64_t step) {
  ops::adamw_update(param, grad, exp_avg, exp_avg_sq,
                    {lr, group.beta1, group.beta2, group.eps, group.weight_decay, step});
}

DType muon_scratch_dtype(Device device, DType param_dtype) {
  return device == Device::kCuda ? DType::kBF16 : param_dtype;
}

MuonScratch take_muon_scratch(ArenaAllocator& arena, int64_t max_matrix_elements, int64_t max_side) {
  const int64_t matrix_elements = std::max<int64_t>(max_matrix_elements, 1);
  const int64_t gram_elements = std::max<int64_t>(max_side * max_side, 1);
  const DType dtype = muon_scratch_dtype(arena.device(), arena.dtype());
  return {arena.take({matrix_elements}, dtype), arena.take({matrix_elements}, dtype),
          arena.take({gram_elements}, dtype), arena.take({gram_elements}, dtype)};
}

MuonScratch take_muon_scratch_for(ArenaAllocator& arena, const std::vector<ParamGroup>& groups) {
  int64_t max_matrix = 0, max_side = 0;
  for (const ParamGroup& group : groups) {
    if (group.kind != GroupKind::kMuon) continue;
    max_matrix = std::max(max_matrix, group.rows * group.cols);
    max_side = std::max(max_side, std::min(group.rows, group.cols));
  }
  return take_muon_scratch(arena, max_matrix, max_side);
}

void muon_step(TensorView param, TensorView grad, TensorView momentum, TensorView second_moment,
               const ParamGroup& group, const ScheduleValues& schedule, double lr,
               const MuonScratch& scratch) {
  const int64_t rows = group.rows, cols = group.cols;
  const bool tall = rows > cols;  // nanochat orthogonalises through the smaller Gram matrix
  const int64_t side = std::min(rows, cols);
  TensorView x = matrix(scratch.matrix_a, rows, cols), y = matrix(scratch.matrix_b, rows, cols);
  const TensorView gram = matrix(scratch.gram_a, side, side), poly = matrix(scratch.gram_b, side, side);
  ops::muon_nesterov_momentum(x, momentum, grad, schedule.muon_momentum);
  ops::muon_equilibrate_rows(x);
  // Polar Express, nanochat's constants: X / (1.01 ||X|| + 1e-6), then the quintic iterations.
  ops::normalize_frobenius(x, 1.01, 1e-6);
  for (int iteration = 0; iteration < group.ns_steps; ++iteration) {
    const auto& [a, b, c] = kPolarExpressCoefficients[iteration];
    if (tall) {
      ops::matmul(gram, x, Transpose::kYes, x, Transpose::kNo, 1.0, 0.0);  // A = X^T X
    } else {
      ops::matmul(gram, x, Transpose::kNo, x, Transpose::kYes, 1.0, 0.0);  // A = X X^T
    }
    ops::copy(poly, gram);
    ops::matmul(poly, gram, Transpose::kNo, gram, Transpose::kNo, c, b);  // B = b A + c A A
    ops::copy(y, x);
    if (tall) {
      ops::matmul(y, x, Transpose::kNo, poly, Transpose::kNo, 1.0, a);  // X' = a X + X B
    } else {
      ops::matmul(y, poly, Transpose::kNo, x, Transpose::kNo, 1.0, a);  // X' = a X + B X
    }
    std::swap(x, y);
  }
  // Muon+: the orthogonalised update has Frobenius norm sqrt(min(m, n)).
  ops::rescale_frobenius(x, std::sqrt(static_cast<double>(side)), 1e-6);
  ops::normuon_variance_reduce(x, second_moment, group.muon_beta2);
  ops::cautious_weight_decay_step(param, x, lr * group.lr_shape_scale(), schedule.muon_weight_decay);
}

}  // namespace nanoforge
