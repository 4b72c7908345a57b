// MuonAdamW. The Polar Express iterations use two GEMMs per product: A = X X^T (or X^T X for tall X),
// B = b A + c A A, X' = a X + B X (or X B); beta carries the linear terms so no extra elementwise pass runs.
#include "optim/muon_adamw.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace nanoforge {
namespace {

using ops::Transpose;

int64_t index_of(const ParamLayout& layout, const ParamInfo* info) { return info - layout.params().data(); }

// The (rows, cols) prefix of a scratch buffer.
TensorView matrix(TensorView scratch, int64_t rows, int64_t cols) {
  return scratch.rows(0, rows * cols).reshaped({rows, cols});
}

}  // namespace

MuonAdamW::MuonAdamW(std::vector<ParamGroup> groups, const ParamLayout& layout, TensorView params, TensorView grads)
    : groups_(std::move(groups)), layout_(layout), params_(params), grads_(grads) {
  NANOFORGE_CHECK(params.numel() == layout.total_numel() && grads.numel() == layout.total_numel(),
                  "MuonAdamW: buffers {} / {} do not hold the layout's {} elements", params.describe(),
                  grads.describe(), layout.total_numel());
  // Plan the state (and the Muon scratch) in two passes over the same code: measure, then assign views.
  int64_t max_matrix = 0, max_gram = 0;
  for (const ParamGroup& group : groups_) {
    if (group.kind != GroupKind::kMuon) continue;
    max_matrix = std::max(max_matrix, group.rows * group.cols);
    const int64_t side = std::min(group.rows, group.cols);
    max_gram = std::max(max_gram, side * side);
  }
  auto plan = [&](ArenaAllocator& arena) {
    param_state_.assign(layout.params().size(), ParamState{});
    for (const ParamGroup& group : groups_) {
      for (const ParamInfo* info : group.params) {
        ParamState& state = param_state_[index_of(layout, info)];
        if (group.kind == GroupKind::kAdamW) {
          state.exp_avg = arena.take(std::span<const int64_t>(info->shape));
          state.exp_avg_sq = arena.take(std::span<const int64_t>(info->shape));
        } else {
          state.momentum_buffer = arena.take({group.rows, group.cols});
          state.second_moment =
              group.rows >= group.cols ? arena.take({group.rows, 1}) : arena.take({1, group.cols});
        }
      }
    }
  };
  ArenaAllocator measure(params.device, params.dtype);
  plan(measure);
  state_ = DeviceBuffer(params.device, measure.used_bytes());
  ArenaAllocator arena(state_, params.dtype);
  plan(arena);
  ArenaAllocator measure_scratch(params.device, params.dtype);
  for (int64_t size : {max_matrix, max_matrix, max_gram, max_gram}) measure_scratch.take({std::max<int64_t>(size, 1)});
  scratch_ = DeviceBuffer(params.device, measure_scratch.used_bytes());
  ArenaAllocator scratch_arena(scratch_, params.dtype);
  scratch_x_ = scratch_arena.take({std::max<int64_t>(max_matrix, 1)});
  scratch_y_ = scratch_arena.take({std::max<int64_t>(max_matrix, 1)});
  scratch_a_ = scratch_arena.take({std::max<int64_t>(max_gram, 1)});
  scratch_b_ = scratch_arena.take({std::max<int64_t>(max_gram, 1)});
}

const MuonAdamW::ParamState& MuonAdamW::state(const std::string& name) const {
  return param_state_[index_of(layout_, &layout_.at(name))];
}

TensorView MuonAdamW::view(TensorView flat, const ParamInfo& info) const {
  return TensorView(flat.rows(info.offset, info.numel).data, std::span<const int64_t>(info.shape), flat.dtype,
                    flat.device);
}

void MuonAdamW::step(const ScheduleValues& schedule) {
  ++steps_taken_;
  for (const ParamGroup& group : groups_) {
    const double lr = group.initial_lr * schedule.lr_multiplier;
    if (group.kind == GroupKind::kAdamW) {
      adamw_step(group, lr);
    } else {
      muon_step(group, schedule, lr);
    }
  }
}

void MuonAdamW::adamw_step(const ParamGroup& group, double lr) {
  const ops::AdamWStep hyper{lr, group.beta1, group.beta2, group.eps, group.weight_decay, steps_taken_};
  for (const ParamInfo* info : group.params) {
    const ParamState& state = param_state_[index_of(layout_, info)];
    ops::adamw_update(view(params_, *info), view(grads_, *info), state.exp_avg, state.exp_avg_sq, hyper);
  }
}

void MuonAdamW::muon_step(const ParamGroup& group, const ScheduleValues& schedule, double lr) {
  const int64_t rows = group.rows, cols = group.cols;
  const bool tall = rows > cols;  // nanochat orthogonalises through the smaller Gram matrix
  const int64_t side = std::min(rows, cols);
  const double lr_effective = lr * group.lr_shape_scale();
  for (const ParamInfo* info : group.params) {
    const ParamState& state = param_state_[index_of(layout_, info)];
    TensorView x = matrix(scratch_x_, rows, cols), y = matrix(scratch_y_, rows, cols);
    const TensorView gram = matrix(scratch_a_, side, side), poly = matrix(scratch_b_, side, side);
    ops::muon_nesterov_momentum(x, state.momentum_buffer, view(grads_, *info), schedule.muon_momentum);
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
    ops::normuon_variance_reduce(x, state.second_moment, group.muon_beta2);
    ops::cautious_weight_decay_step(view(params_, *info), x, lr_effective, schedule.muon_weight_decay);
  }
}

}  // namespace nanoforge
