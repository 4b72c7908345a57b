// The cost of each op, read off the CUDA kernels that run it (kernels/cuda/*.cu): which tensors each kernel
// streams through DRAM, how many kernels a launcher starts, what arithmetic they do. Bytes count each operand
// once per kernel that reads or writes it; re-reads of a tile by neighbouring blocks (GEMM operands, K/V
// tiles, a row's previous row) are taken to hit L2. When a kernel changes, its cost here changes with it.
#include "perf/op_cost.h"

#include <algorithm>

namespace nanoforge {

using ops::Accumulate;
using ops::AdamWStep;
using ops::Transpose;

// The recorder: each op priced by its cost function, under its own name.
#define NANOFORGE_OP(name, Return, params, args) \
  void OpCostRecorder::name params {             \
    sink_.record(#name, cost::name args);        \
  }
#define NANOFORGE_CUDA_VARIANT NANOFORGE_OP
#include "kernels/op_list.inc"

namespace {

// CUDA-core operations per element of the loss, from its kernels: the forward's tanh as 1 - 2 / (e^2u + 1)
// and exp (~20 with their range handling) and the online max / sum (~6); the backward recomputes tanh and
// exp and forms the gradient (~35). Estimates from reading the code, not counted by a profiler.
constexpr double kLossForwardOpsPerLogit = 30;
constexpr double kLossBackwardOpsPerLogit = 35;
// Special-function-unit instructions per logit (kernels/cuda/softcap_cross_entropy.cu): the cap's __expf
// and __fdividef and the softmax's __expf in the forward (3); the backward recomputes all three (3 more).
constexpr double kLossForwardSfuPerLogit = 3;
constexpr double kLossBackwardSfuPerLogit = 3;
// A few CUDA-core operations per element for plain elementwise kernels (scales, adds, rsqrt per row):
// never the bound next to their bytes, listed so that every row has both numbers.
constexpr double kElementwiseOpsPerElement = 4;

double b(const TensorView& t) {
  return static_cast<double>(t.bytes());
}
double n(const TensorView& t) {
  return static_cast<double>(t.numel());
}
// A head slice's own elements (a head is contiguous, so moving a slice moves just these bytes).
double n(const HeadSlice& t) {
  return static_cast<double>(t.batch() * t.seq() * t.heads() * t.head_dim());
}
double b(const HeadSlice& t) {
  return n(t) * static_cast<double>(dtype_bytes(t.dtype()));
}

OpCost streaming(double bytes, double elements, int kernels = 1) {
  OpCost cost;
  cost.bytes = bytes;
  cost.vector_flops = kElementwiseOpsPerElement * elements;
  cost.kernels = kernels;
  return cost;
}

// Sum of squares (blocks' partials, then a one-block fold) and a scale pass over x: normalize_frobenius,
// rescale_frobenius and MuonEq's row version (kernels/cuda/muon_steps.cu).
OpCost reduce_then_scale(const TensorView& x) {
  return streaming(3 * b(x), 2 * n(x), 3);
}

// A fused amax (kernels/cuda/amax.cuh) costs the zeroing of its word, one more launch, and no bytes.
int amax_launches(const ops::AmaxOutput& amax) {
  return amax.wanted() ? 1 : 0;
}

}  // namespace

namespace cost {

int64_t attention_tile_pairs(int64_t seq, int64_t window) {
  const int64_t tiles = (seq + kAttentionTileRows - 1) / kAttentionTileRows;
  int64_t pairs = 0;
  for (int64_t query_tile = 0; query_tile < tiles; ++query_tile) {
    const int64_t first_key_tile =
        std::max<int64_t>(0, query_tile * kAttentionTileRows - window) / kAttentionTileRows;
    pairs += query_tile - first_key_tile + 1;
  }
  return pairs;
}

OpCost fill(TensorView t, double /*value*/) {
  return streaming(b(t), n(t));
}

OpCost copy(TensorView dst, TensorView src) {
  return streaming(b(dst) + b(src), n(dst));
}

// One column block each way: the rows' elements read and written.
OpCost copy_columns(TensorView dst, int64_t /*dst_first_column*/, TensorView /*src*/,
                    int64_t /*src_first_column*/, int64_t columns) {
  const double elements = static_cast<double>(dst.shape[0]) * static_cast<double>(columns);
  return streaming(2 * elements * dtype_bytes(dst.dtype), elements);
}

// The amax pass (unless the amax is given) and the quantise pass (kernels/cuda/fp8.cu) each read the block;
// the codes are written once per layout asked for.
OpCost fp8_quantize(TensorView q, TensorView q_transposed, TensorView /*inv_scale*/, TensorView /*amax*/,
                    ops::Fp8Amax amax_source, TensorView x, int64_t /*first_column*/) {
  const TensorView& shaped = q.data != nullptr ? q : q_transposed;
  const double elements = n(shaped);
  const double x_bytes = elements * dtype_bytes(x.dtype);
  const double code_bytes =
      (q.data != nullptr ? elements : 0) + (q_transposed.data != nullptr ? elements : 0);
  const bool amax_pass = amax_source == ops::Fp8Amax::kCompute;
  // |x|, the scaling multiply, the conversion; launches: the amax word's zeroing and the amax pass, the
  // quantise pass.
  return streaming((amax_pass ? 2 : 1) * x_bytes + code_bytes, 3 * elements, amax_pass ? 3 : 1);
}

// cuBLASLt's FP8 GEMM at the FP8 tensor-core rate.
OpCost fp8_matmul(TensorView out, int64_t /*out_first_column*/, TensorView a, TensorView /*a_inv_scale*/,
                  TensorView b_, TensorView /*b_inv_scale*/, double beta) {
  const double m = static_cast<double>(a.shape[0]), k = static_cast<double>(a.shape[1]);
  const double cols = static_cast<double>(b_.shape[0]);
  OpCost cost;
  cost.kind = CostClass::kFp8Gemm;
  cost.tensor_flops = 2 * m * cols * k;
  cost.bytes = b(a) + b(b_) + (beta != 0 ? 2 : 1) * m * cols * dtype_bytes(out.dtype);
  cost.gemm_rows = a.shape[0];
  cost.gemm_cols = b_.shape[0];
  return cost;
}

OpCost accumulate(TensorView into, TensorView add) {
  return streaming(2 * b(into) + b(add), n(into));
}

OpCost convert(TensorView dst, TensorView src) {
  return streaming(b(dst) + b(src), n(dst));
}

OpCost matmul(TensorView out, TensorView a, Transpose transpose_a, TensorView b_, Transpose /*transpose_b*/,
              double /*alpha*/, double beta) {
  const double m = static_cast<double>(out.shape[0]), cols = static_cast<double>(out.shape[1]);
  const double k = static_cast<double>(transpose_a == Transpose::kYes ? a.shape[0] : a.shape[1]);
  const double out_bytes = (beta != 0 ? 2 : 1) * b(out);  // beta != 0 reads out before writing it
  if (k == 0) return streaming(out_bytes, n(out));        // only the scale kernel runs
  OpCost cost;
  cost.kind = CostClass::kGemm;
  cost.tensor_flops = 2 * m * cols * k;
  cost.bytes = b(a) + b(b_) + out_bytes;
  cost.gemm_rows = out.shape[0];
  cost.gemm_cols = out.shape[1];
  return cost;
}

OpCost embedding_forward(TensorView out, TensorView table, TensorView ids) {
  // One gathered fp32 table row per token, written as a bf16 row.
  return streaming(b(ids) + n(out) * static_cast<double>(dtype_bytes(table.dtype)) + b(out), n(out));
}

OpCost embedding_backward(TensorView d_table, TensorView d_out, TensorView ids,
                          const ops::KernelSettings& settings) {
  if (settings.deterministic) {
    // The ordered kernel: every table element read and written once, every d_out row read once.
    return streaming(b(ids) + b(d_out) + 2 * b(d_table), n(d_out));
  }
  // fp32 atomics: a read-modify-write of one table row per token.
  return streaming(b(ids) + b(d_out) + 2 * n(d_out) * static_cast<double>(dtype_bytes(d_table.dtype)),
                   n(d_out));
}

OpCost rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double /*scale*/,
                       ops::AmaxOutput amax) {
  return streaming(b(x) + b(out) + b(rstd), n(x), 1 + amax_launches(amax));
}

OpCost rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double /*scale*/,
                        Accumulate mode) {
  return streaming(b(d_out) + b(out) + b(rstd) + (mode == Accumulate::kYes ? 2 : 1) * b(d_x), n(d_x));
}

OpCost rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView /*sin*/,
                              double /*scale*/) {
  // In place, one warp per (position, head): x read and written once, rstd written; the rows of cos and sin
  // for the T positions are read once (x is (B, T, heads, D)).
  const double positions = static_cast<double>(x.seq());
  const double table_row_bytes = static_cast<double>(cos.shape[1] * dtype_bytes(cos.dtype));
  return streaming(2 * b(x) + b(rstd) + 2 * positions * table_row_bytes, 2 * n(x));
}

OpCost rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                               double scale) {
  // d_x read and written, the forward's output and rstd read.
  OpCost cost = rotary_rmsnorm_forward(d_x, rstd, cos, sin, scale);
  cost.bytes += b(out);
  return cost;
}

OpCost attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v,
                         int64_t window, double /*scale*/, TensorView /*workspace*/,
                         const ops::KernelSettings& /*settings*/) {
  const double batch = static_cast<double>(q.batch()), heads = static_cast<double>(q.heads());
  const double head_dim = static_cast<double>(q.head_dim());
  const double tile = static_cast<double>(kAttentionTileRows);
  const double pairs = static_cast<double>(attention_tile_pairs(q.seq(), window)) * batch * heads;
  OpCost cost;
  cost.kind = CostClass::kAttentionForward;
  cost.tensor_flops = pairs * 2 * (2 * tile * tile * head_dim);  // S = Q K^T and O += P V per tile pair
  cost.vector_flops = pairs * tile * tile * 8;                   // mask, exp2, max, sum per score
  cost.sfu_ops = pairs * tile * tile;                            // P = exp2(S - max), one per score
  cost.bytes = b(q) + b(k) + b(v) + b(out) + b(lse);
  return cost;
}

OpCost attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                          HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                          double /*scale*/, TensorView /*workspace*/,
                          const ops::KernelSettings& /*settings*/) {
  const double batch = static_cast<double>(q.batch()), heads = static_cast<double>(q.heads());
  const double head_dim = static_cast<double>(q.head_dim());
  const double tile = static_cast<double>(kAttentionTileRows);
  const double pairs = static_cast<double>(attention_tile_pairs(q.seq(), window)) * batch * heads;
  const double delta_bytes = b(lse);  // delta = rowsum(dO * O) is (B, H, T) f32, as lse
  OpCost cost;
  cost.kind = CostClass::kAttentionBackward;
  // Seven tile GEMMs per pair: dK/dV recomputes S and dP and forms dV and dK; dQ recomputes S and dP and
  // forms dQ (FlashAttention-2 has five: it accumulates dQ with atomics instead).
  cost.tensor_flops = pairs * 7 * (2 * tile * tile * head_dim);
  cost.vector_flops = pairs * tile * tile * 2 * 10 + 2 * n(d_out);
  cost.sfu_ops = pairs * tile * tile * 2;         // P = exp2(S - lse) again in each of the two kernels
  cost.bytes = (b(d_out) + b(out) + delta_bytes)  // delta kernel
               + (b(k) + b(v) + b(q) + b(d_out) + b(lse) + delta_bytes + b(d_k) + b(d_v))  // dK, dV
               + (b(q) + b(d_out) + b(lse) + delta_bytes + b(k) + b(v) + b(d_q));          // dQ
  cost.kernels = 3;
  return cost;
}

// cuDNN's fused attention (model.attention=cudnn or auto where cuDNN runs): its kernels are not ours to read,
// so it is priced as the work any flash-style kernel does — the same tile pairs as our forward, and a
// backward with FlashAttention-2's five tile GEMMs — at cuDNN's own assumed efficiency (perf/gpu_specs.cpp).
OpCost cudnn_attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v,
                               int64_t window, double scale, TensorView workspace,
                               const ops::KernelSettings& settings) {
  OpCost cost = cost::attention_forward(out, lse, q, k, v, window, scale, workspace, settings);
  cost.kind = CostClass::kCudnnAttentionForward;
  return cost;
}

OpCost cudnn_attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                                HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                                double scale, TensorView workspace, const ops::KernelSettings& settings) {
  OpCost cost =
      cost::attention_backward(d_q, d_k, d_v, d_out, q, k, v, out, lse, window, scale, workspace, settings);
  cost.kind = CostClass::kCudnnAttentionBackward;
  cost.tensor_flops *= 5.0 / 7.0;  // five tile GEMMs a pair where ours has seven
  return cost;
}

OpCost relu_squared_forward(TensorView out, TensorView x, ops::AmaxOutput amax) {
  return streaming(b(x) + b(out), n(x), 1 + amax_launches(amax));
}

OpCost relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out) {
  return streaming(b(d_out) + b(out) + b(d_x), n(out));
}

// Our MLP GEMM (kernels/cuda/mlp_gemm.cu): the GEMM's FLOPs at our GEMM's efficiency, its operands and
// output, and the backward's read of act.
OpCost linear_relu_squared_forward(TensorView act, TensorView x, TensorView w,
                                   const ops::KernelSettings& /*settings*/) {
  OpCost cost = cost::matmul(act, x, Transpose::kNo, w, Transpose::kYes, 1.0, 0.0);
  cost.kind = CostClass::kOwnGemm;
  cost.vector_flops = 2 * n(act);  // relu and the square in the epilogue
  return cost;
}

OpCost relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView w, TensorView act,
                                    const ops::KernelSettings& /*settings*/) {
  OpCost cost = cost::matmul(d_pre, d_y, Transpose::kNo, w, Transpose::kNo, 1.0, 0.0);
  cost.kind = CostClass::kOwnGemm;
  cost.bytes += b(act);
  cost.vector_flops = 4 * n(act);  // sqrt (counted as two), 2 x and the product in the epilogue
  return cost;
}

// Our MLP GEMM on FP8 codes (the same kernel): the GEMM's FLOPs at the FP8 rate and our GEMM's efficiency,
// its code operands and bf16 output, the backward's read of act; the forward's amax word zeroed first.
OpCost fp8_linear_relu_squared_forward(TensorView act, ops::AmaxOutput amax, TensorView x,
                                       TensorView x_inv_scale, TensorView w, TensorView w_inv_scale,
                                       const ops::KernelSettings& /*settings*/) {
  OpCost cost = cost::fp8_matmul(act, 0, x, x_inv_scale, w, w_inv_scale, 0.0);
  cost.kind = CostClass::kOwnFp8Gemm;
  cost.vector_flops = 4 * n(act);  // the scales, the rounding, relu and the square in the epilogue
  cost.kernels += amax_launches(amax);
  return cost;
}

OpCost fp8_relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView d_y_inv_scale,
                                        TensorView w, TensorView w_inv_scale, TensorView act,
                                        const ops::KernelSettings& /*settings*/) {
  OpCost cost = cost::fp8_matmul(d_pre, 0, d_y, d_y_inv_scale, w, w_inv_scale, 0.0);
  cost.kind = CostClass::kOwnFp8Gemm;
  cost.bytes += b(act);
  cost.vector_flops = 6 * n(act);  // the scales, the rounding, sqrt (counted as two), 2 x and the product
  return cost;
}

OpCost smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView /*gate_weight*/,
                     TensorView /*lambda*/) {
  return streaming(b(x) + b(out) + b(gate_sigmoid), n(x));
}

OpCost smear_backward(TensorView d_x, TensorView /*d_gate_weight*/, TensorView /*d_lambda*/, TensorView d_out,
                      TensorView x, TensorView gate_sigmoid, TensorView /*gate_weight*/,
                      TensorView /*lambda*/) {
  // The pass, then two folds of the blocks' partial sums (gate weight, lambda).
  return streaming(b(d_out) + b(x) + b(gate_sigmoid) + b(d_x), n(x), 3);
}

OpCost value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                                TensorView table, TensorView ids) {
  const double rows = static_cast<double>(u.shape[0]);
  const double gate_bytes = rows * static_cast<double>(gate_weight.shape[1] * dtype_bytes(u.dtype));
  const double table_rows = n(v) * static_cast<double>(dtype_bytes(table.dtype));  // one gathered row a token
  return streaming(b(ids) + gate_bytes + table_rows + 2 * b(v) + b(gate_sigmoid), n(v));
}

OpCost value_embed_gate_backward(TensorView /*d_u*/, TensorView /*d_gate_weight*/, TensorView d_table,
                                 HeadSlice d_v, TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                                 TensorView table, TensorView ids, const ops::KernelSettings& settings) {
  const double rows = static_cast<double>(u.shape[0]);
  const double gate_bytes = rows * static_cast<double>(gate_weight.shape[1] * dtype_bytes(u.dtype));
  const double table_row_bytes = n(d_v) * static_cast<double>(dtype_bytes(table.dtype));
  // The pass reads d_v, the gate inputs, the sigmoids and the gathered table rows and adds into d_u[:, :G];
  // then the fold of the gate weight's partials; the table gradient is a read-modify-write of one row per
  // token (atomics in the pass, or the ordered scatter kernel in deterministic mode).
  return streaming(b(ids) + b(d_v) + 3 * gate_bytes + b(gate_sigmoid) + table_row_bytes +
                       2 * n(d_v) * static_cast<double>(dtype_bytes(d_table.dtype)),
                   n(d_v), settings.deterministic ? 3 : 2);
}

OpCost residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                    TensorView x0, TensorView /*resid_lambda*/, TensorView /*x0_lambda*/,
                                    ops::AmaxOutput amax) {
  // One warp per row: x and x0 read, the residual, the normalised row and rstd written.
  return streaming(b(x) + b(x0) + b(residual) + b(out) + b(rstd), 2 * n(x), 1 + amax_launches(amax));
}

OpCost residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView /*d_resid_lambda*/,
                                     TensorView /*d_x0_lambda*/, TensorView d_out, TensorView out,
                                     TensorView rstd, TensorView x, TensorView x0,
                                     TensorView /*resid_lambda*/, TensorView /*x0_lambda*/) {
  // The pass (d_residual read and written in place, d_x0 read and written, d_out, out, rstd, x, x0 read),
  // then one fold of the two lambdas' partial sums.
  return streaming(2 * b(d_residual) + 2 * b(d_x0) + b(d_out) + b(out) + b(rstd) + b(x) + b(x0), 2 * n(x), 2);
}

OpCost backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView /*lambda*/) {
  return streaming(b(x) + b(x_backout) + b(out), n(x));
}

OpCost backout_backward(TensorView d_x_backout, TensorView /*d_lambda*/, TensorView d_out,
                        TensorView x_backout, TensorView /*lambda*/) {
  return streaming(b(d_out) + b(x_backout) + b(d_x_backout), n(d_out), 2);
}

OpCost softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                     double /*softcap*/) {
  OpCost cost = streaming(b(logits) + b(targets) + b(losses) + b(lse), n(logits));
  cost.vector_flops = kLossForwardOpsPerLogit * n(logits);
  cost.sfu_ops = kLossForwardSfuPerLogit * n(logits);
  return cost;
}

OpCost softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                              TensorView targets, double /*softcap*/, double /*loss_scale*/) {
  // A one-block kernel counts the valid targets; then each row's block reads its logits, and sweeps the row
  // again (from L2) to write the gradient over them: the logits cross DRAM once each way.
  OpCost cost = streaming(2 * b(logits) + 2 * b(targets) + b(losses) + b(lse), n(logits), 2);
  cost.vector_flops = (kLossForwardOpsPerLogit + kLossBackwardOpsPerLogit) * n(logits);
  cost.sfu_ops = (kLossForwardSfuPerLogit + kLossBackwardSfuPerLogit) * n(logits);
  return cost;
}

OpCost sum_loss(TensorView losses, TensorView targets) {
  OpCost cost = streaming(b(losses) + b(targets), n(losses));
  cost.host_sync = true;
  return cost;
}

OpCost adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                    const AdamWStep& /*hyper*/) {
  // param, exp_avg, exp_avg_sq read and written, grad read.
  OpCost cost = streaming(2 * b(param) + b(grad) + 2 * b(exp_avg) + 2 * b(exp_avg_sq), n(param));
  cost.vector_flops = 16 * n(param);
  return cost;
}

OpCost muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad,
                              double /*momentum*/) {
  return streaming(2 * b(momentum_buffer) + b(grad) + b(update), n(grad));
}

OpCost muon_equilibrate_rows(TensorView x) {
  return reduce_then_scale(x);
}

OpCost normalize_frobenius(TensorView x, double /*multiplier*/, double /*eps*/) {
  return reduce_then_scale(x);
}

OpCost rescale_frobenius(TensorView x, double /*target_norm*/, double /*eps*/) {
  return reduce_then_scale(x);
}

OpCost normuon_variance_reduce(TensorView g, TensorView second_moment, double /*beta2*/) {
  OpCost cost = reduce_then_scale(g);
  cost.bytes += 2 * b(second_moment);
  return cost;
}

OpCost cautious_weight_decay_step(TensorView param, TensorView update, double /*lr*/,
                                  double /*weight_decay*/) {
  return streaming(2 * b(param) + b(update), n(param));
}

OpCost squared_norm(TensorView x) {
  OpCost cost = streaming(b(x), 2 * n(x), 2);  // blocks' partial sums, then the fold
  cost.host_sync = true;
  return cost;
}

// squared_norm's two kernels, the total added on the device: no read-back.
OpCost add_squared_norm(TensorView total, TensorView x) {
  return streaming(b(x) + 2 * b(total), 2 * n(x), 2);
}

// sum_loss's one-block kernel, the mean added on the device: no read-back.
OpCost add_mean_loss(TensorView total, TensorView losses, TensorView targets) {
  return streaming(b(losses) + b(targets) + 2 * b(total), n(losses));
}

}  // namespace cost
}  // namespace nanoforge
