// FP8 Linear GEMMs over ops::fp8_quantize / ops::fp8_matmul (model/fp8_linear.h). The operands are
// quantised again where fp8.py reuses its saved codes (the input and the weight in the backward pass), from
// the amax the forward pass kept: the same tensors give the same codes and scales, and only the amax (one
// float per operand) is kept between the passes.
#include "model/fp8_linear.h"

#include <algorithm>

namespace nanoforge {
namespace {

using ops::Accumulate;
using ops::Fp8Amax;
using ops::Transpose;

constexpr int64_t kAmaxSlotsPerLinear = 1 + Fp8AmaxSlots::kMaxSegments;
constexpr int64_t kBlockLinears = static_cast<int64_t>(BlockLinear::kCount);

Fp8AmaxSlots slots_of_row(const TensorView& amax, int64_t row) {
  Fp8AmaxSlots slots;
  if (amax.data == nullptr) return slots;
  const TensorView all = amax.reshaped({amax.numel()});
  slots.x = all.rows(row * kAmaxSlotsPerLinear, 1);
  for (int s = 0; s < Fp8AmaxSlots::kMaxSegments; ++s)
    slots.weight[s] = all.rows(row * kAmaxSlotsPerLinear + 1 + s, 1);
  return slots;
}

TensorView codes(const TensorView& scratch, int64_t rows, int64_t cols, DType format) {
  NANOFORGE_CHECK(rows * cols <= scratch.numel(), "fp8 scratch of {} bytes is too small for {}x{}",
                  scratch.numel(), rows, cols);
  return TensorView(scratch.data, {rows, cols}, format, scratch.device);
}

TensorView dense_columns(const Fp8Scratch& scratch, int64_t rows, int64_t cols) {
  NANOFORGE_CHECK(rows * cols <= scratch.columns.numel(), "fp8 column scratch too small for {}x{}", rows,
                  cols);
  return TensorView(scratch.columns.data, {rows, cols}, scratch.columns.dtype, scratch.columns.device);
}

}  // namespace

bool any_fp8(std::span<const LinearSegment> segments) {
  return std::any_of(segments.begin(), segments.end(), [](const LinearSegment& s) { return s.fp8; });
}

Fp8AmaxSlots Fp8Scratch::block_amax(int64_t layer, BlockLinear linear) const {
  return slots_of_row(amax, layer * kBlockLinears + static_cast<int64_t>(linear));
}

Fp8AmaxSlots Fp8Scratch::lm_head_amax() const {
  return amax.data == nullptr ? Fp8AmaxSlots() : slots_of_row(amax, amax.shape[0] - 1);
}

void plan_fp8_scratch(const GPTConfig& config, const Fp8Linears& linears, int64_t rows, ArenaAllocator& arena,
                      Fp8Scratch& scratch) {
  const int64_t C = config.n_embd;
  struct Shape {
    bool fp8;
    int64_t in, out;
  };
  const Shape shapes[] = {{linears.c_q, C, config.n_head * config.head_dim()},
                          {linears.c_k, C, config.kv_dim()},
                          {linears.c_proj, C, C},
                          {linears.mlp_fc, C, config.mlp_dim()},
                          {linears.mlp_proj, config.mlp_dim(), C},
                          {linears.lm_head, C, config.padded_vocab_size()}};
  int64_t widest_in = 0, widest_out = 0, largest_weight = 0;
  for (const Shape& s : shapes) {
    if (!s.fp8) continue;
    widest_in = std::max(widest_in, s.in);
    widest_out = std::max(widest_out, s.out);
    largest_weight = std::max(largest_weight, s.in * s.out);
  }
  scratch = Fp8Scratch();
  if (largest_weight == 0) return;  // the filter converted nothing: the model runs in full precision
  scratch.x_codes = arena.take({rows * widest_in}, DType::kF8E4M3);
  scratch.x_codes_transposed = arena.take({rows * widest_in}, DType::kF8E4M3);
  scratch.w_codes = arena.take({largest_weight}, DType::kF8E4M3);
  scratch.g_codes = arena.take({rows * widest_out}, DType::kF8E5M2);
  scratch.g_codes_transposed = arena.take({rows * widest_out}, DType::kF8E5M2);
  scratch.x_inv_scale = arena.take({1}, DType::kF32);
  scratch.w_inv_scale = arena.take({1}, DType::kF32);
  scratch.g_inv_scale = arena.take({1}, DType::kF32);
  scratch.g_amax = arena.take({1}, DType::kF32);
  scratch.amax = arena.take({config.n_layer * kBlockLinears + 1, kAmaxSlotsPerLinear}, DType::kF32);
  if (linears.lm_head && config.padded_vocab_size() != config.vocab_size) {
    scratch.padded_logits = arena.take({rows, config.padded_vocab_size()});
  }
  // c_q in FP8 beside full-precision c_k and c_v (or the reverse) needs their columns densely.
  if (linears.c_q != linears.c_k) {
    scratch.columns = arena.take({rows * std::max(config.n_head * config.head_dim(), config.kv_dim())});
  }
}

void fp8_linear_forward(const Fp8Scratch& scratch, const Fp8AmaxSlots& amax, Fp8Amax x_amax, TensorView y,
                        TensorView x, TensorView weight, std::span<const LinearSegment> segments,
                        Accumulate mode) {
  const int64_t rows = x.shape[0], in = x.shape[1];
  const double beta = mode == Accumulate::kYes ? 1.0 : 0.0;
  NANOFORGE_CHECK(segments.size() == 1 || mode == Accumulate::kNo || !any_fp8(segments),
                  "fp8_linear_forward: a segmented weight's output is written, not added");
  if (!any_fp8(segments)) {  // the whole weight in full precision: one GEMM, however it is segmented
    ops::matmul(y, x, Transpose::kNo, weight, Transpose::kYes, 1.0, beta);
    return;
  }
  NANOFORGE_CHECK(segments.size() <= Fp8AmaxSlots::kMaxSegments, "fp8_linear_forward: {} segments",
                  segments.size());
  const TensorView x_codes = codes(scratch.x_codes, rows, in, DType::kF8E4M3);
  ops::fp8_quantize(x_codes, TensorView(), scratch.x_inv_scale, amax.x, x_amax, x, 0);
  for (size_t s = 0; s < segments.size(); ++s) {
    const LinearSegment& segment = segments[s];
    const TensorView w = weight.rows(segment.first_row, segment.rows);
    if (segment.fp8) {
      const TensorView w_codes = codes(scratch.w_codes, segment.rows, in, DType::kF8E4M3);
      ops::fp8_quantize(w_codes, TensorView(), scratch.w_inv_scale, amax.weight[s], Fp8Amax::kCompute, w, 0);
      ops::fp8_matmul(y, segment.first_row, x_codes, scratch.x_inv_scale, w_codes, scratch.w_inv_scale, beta);
    } else {
      const TensorView columns = dense_columns(scratch, rows, segment.rows);
      ops::matmul(columns, x, Transpose::kNo, w, Transpose::kYes, 1.0, 0.0);
      ops::copy_columns(y, segment.first_row, columns, 0, segment.rows);
    }
  }
}

void fp8_mlp_fc_forward(const Fp8Scratch& scratch, const Fp8AmaxSlots& amax, ops::AmaxOutput act_amax,
                        TensorView act, TensorView x, TensorView weight,
                        const ops::KernelSettings& settings) {
  const int64_t rows = x.shape[0], in = x.shape[1], out = weight.shape[0];
  const TensorView x_codes = codes(scratch.x_codes, rows, in, DType::kF8E4M3);
  ops::fp8_quantize(x_codes, TensorView(), scratch.x_inv_scale, amax.x, Fp8Amax::kGiven, x, 0);
  const TensorView w_codes = codes(scratch.w_codes, out, in, DType::kF8E4M3);
  ops::fp8_quantize(w_codes, TensorView(), scratch.w_inv_scale, amax.weight[0], Fp8Amax::kCompute, weight, 0);
  ops::fp8_linear_relu_squared_forward(act, act_amax, x_codes, scratch.x_inv_scale, w_codes,
                                       scratch.w_inv_scale, settings);
}

void fp8_linear_backward(const Fp8Scratch& scratch, const Fp8AmaxSlots& amax, TensorView d_x, Accumulate mode,
                         TensorView d_weight, TensorView d_y, TensorView x, Fp8Input x_is, TensorView weight,
                         std::span<const LinearSegment> segments, const ops::KernelSettings& settings) {
  const int64_t rows = x.shape[0], in = x.shape[1];
  NANOFORGE_CHECK(
      x_is == Fp8Input::kPlain || (segments.size() == 1 && segments[0].fp8 && mode == Accumulate::kNo),
      "fp8_linear_backward: the gradient through ReLU^2 is written, by one FP8 weight");
  if (!any_fp8(segments)) {  // the whole weight in full precision: one GEMM each way
    ops::matmul(d_weight, d_y, Transpose::kYes, x, Transpose::kNo, 1.0, 1.0);
    ops::matmul(d_x, d_y, Transpose::kNo, weight, Transpose::kNo, 1.0, mode == Accumulate::kYes ? 1.0 : 0.0);
    return;
  }
  NANOFORGE_CHECK(segments.size() <= Fp8AmaxSlots::kMaxSegments, "fp8_linear_backward: {} segments",
                  segments.size());
  const TensorView x_codes_transposed = codes(scratch.x_codes_transposed, in, rows, DType::kF8E4M3);
  ops::fp8_quantize(TensorView(), x_codes_transposed, scratch.x_inv_scale, amax.x, Fp8Amax::kGiven, x, 0);
  for (size_t s = 0; s < segments.size(); ++s) {
    const LinearSegment& segment = segments[s];
    const double d_x_beta = s == 0 && mode == Accumulate::kNo ? 0.0 : 1.0;
    const TensorView w = weight.rows(segment.first_row, segment.rows);
    const TensorView d_w = d_weight.rows(segment.first_row, segment.rows);
    if (segment.fp8) {
      const TensorView g_codes = codes(scratch.g_codes, rows, segment.rows, DType::kF8E5M2);
      const TensorView g_codes_transposed =
          codes(scratch.g_codes_transposed, segment.rows, rows, DType::kF8E5M2);
      // The output gradient's amax is taken here: no other pass quantises this d_y.
      ops::fp8_quantize(g_codes, g_codes_transposed, scratch.g_inv_scale, scratch.g_amax, Fp8Amax::kCompute,
                        d_y, segment.first_row);
      const TensorView w_codes_transposed = codes(scratch.w_codes, in, segment.rows, DType::kF8E4M3);
      ops::fp8_quantize(TensorView(), w_codes_transposed, scratch.w_inv_scale, amax.weight[s],
                        Fp8Amax::kGiven, w, 0);
      // d_x = d_y W: (N, out) x (in, out)^T; d_W += d_y^T x: (out, N) x (in, N)^T.
      if (x_is == Fp8Input::kReluSquared) {  // x is act: d_x = d_y W times 2 sqrt(act), in one op
        ops::fp8_relu_squared_linear_backward(d_x, g_codes, scratch.g_inv_scale, w_codes_transposed,
                                              scratch.w_inv_scale, x, settings);
      } else {
        ops::fp8_matmul(d_x, 0, g_codes, scratch.g_inv_scale, w_codes_transposed, scratch.w_inv_scale,
                        d_x_beta);
      }
      ops::fp8_matmul(d_w, 0, g_codes_transposed, scratch.g_inv_scale, x_codes_transposed,
                      scratch.x_inv_scale, 1.0);
    } else {
      const TensorView d_y_columns = dense_columns(scratch, rows, segment.rows);
      ops::copy_columns(d_y_columns, 0, d_y, segment.first_row, segment.rows);
      ops::matmul(d_w, d_y_columns, Transpose::kYes, x, Transpose::kNo, 1.0, 1.0);
      ops::matmul(d_x, d_y_columns, Transpose::kNo, w, Transpose::kNo, 1.0, d_x_beta);
    }
  }
}

}  // namespace nanoforge
