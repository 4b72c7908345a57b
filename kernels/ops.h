// The op list: the only compute entry points model/ and optim/ call. Each op takes TensorViews and runs on
// the device its tensors live on (all tensors of one call share a device and, except ids/targets, a dtype);
// kernels/cpu/ implements every op for f32 and f64, kernels/cuda/ for bf16 activations (growing, see
// docs/kernels.md). Ops never allocate: scratch space is passed in as a workspace sized by the matching
// *_workspace_bytes() function. Shapes below use N = B*T token rows, C channels, H query heads, Hkv key/value
// heads, D head dim, V vocab. All tensors are row-major and contiguous.
#pragma once

#include <cstdint>

#include "kernels/head_slice.h"
#include "kernels/tensor.h"

namespace nanoforge::ops {

// nanochat's F.rms_norm(x, (C,)) with eps=None: torch uses fp32 machine epsilon 2^-23 for fp32 math.
inline constexpr double kRmsNormEps = 1.1920928955078125e-07;

// Deterministic mode (the recipe key train.deterministic): CUDA kernels that would otherwise add into one
// place with atomics, in an order that changes from run to run, use a fixed order instead (slower). The
// CPU backend is deterministic either way. Process-wide; set it before the first step.
void set_deterministic(bool on);
bool deterministic();

enum class Transpose : bool { kNo, kYes };
enum class Accumulate : bool { kNo, kYes };  // write the gradient, or add it to what is there

// ---- memory ----
void fill(TensorView t, double value);  // every dtype of its device (f64 on the GPU too: a step's scalars)
void copy(TensorView dst, TensorView src);         // same shape, dtype and device
void accumulate(TensorView into, TensorView add);  // into += add
// dst = src converted to dst's dtype (same shape and device), rounded to nearest even: f32 <-> bf16 on the
// GPU (the fp32 master weights to the bf16 copies matmul reads), f32 <-> f64 on the CPU. Same dtypes: a copy.
void convert(TensorView dst, TensorView src);

// ---- dense algebra ----
// out (M, N) = alpha * op(a) @ op(b) + beta * out, where op(a) is (M, K) and op(b) is (K, N). With beta = 0,
// out is not read (stale NaNs there do not leak through).
// A Linear layer y = x W^T with W (out, in) is matmul(y, x, kNo, W, kYes, 1, 0).
void matmul(TensorView out, TensorView a, Transpose transpose_a, TensorView b, Transpose transpose_b,
            double alpha, double beta);

// ---- embeddings ----
// out (N, C) = table (V, C) [ids (N) i32]. Ids must lie in [0, V).
void embedding_forward(TensorView out, TensorView table, TensorView ids);
// d_table (V, C) += d_out rows scattered by ids; summed in token order (deterministic).
void embedding_backward(TensorView d_table, TensorView d_out, TensorView ids);

// ---- normalisation ----
// out (R, D) = scale * x * rstd with rstd (R) = 1 / sqrt(mean(x^2) + kRmsNormEps). out may alias x. rstd is
// in the accumulation type (f32 for f32/bf16, f64 for f64). scale is 1 for nanochat's norm() and 1.2 for its
// QK-norm.
void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale);
// d_x (R, D) = rstd * (scale * d_out - out * mean(d_out * out) / scale), written or added. With
// Accumulate::kNo, d_x may alias d_out.
void rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                      Accumulate mode);

// ---- rotary position embedding with nanochat's QK-norm, one pass ----
// x (B, T, heads, D), q or k (a HeadSlice: the model's are inside the fused projection's output), in place:
// rotated, then RMS-normalised per head and scaled (nanochat's apply_rotary_emb then norm(), times 1.2). With
// x1 = x[..., :D/2], x2 = x[..., D/2:], position t:
//   r = cat(x1 cos + x2 sin, -x1 sin + x2 cos)    (a rotation by -theta; halves, not interleaved)
//   x = scale * r * rstd,  rstd (B*T*heads) = 1 / sqrt(mean(r^2) + kRmsNormEps), in the accumulation type.
// cos, sin (T_max, D/2), T_max >= T; row t holds position t.
void rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView sin, double scale);
// In place on the gradient d_x (B, T, heads, D): the RMSNorm backward from the forward's output `out` (x
// after rotary_rmsnorm_forward) and rstd (rmsnorm_backward's formula), then the transpose rotation R^T.
void rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                             double scale);

// ---- causal attention with a sliding window ----
// q (B, T, H, D), k and v (B, T, Hkv, D), H % Hkv == 0 (query head h reads kv head h / (H / Hkv)); each
// of them, and the backward's d_q, d_k, d_v, may be a HeadSlice of a wider tensor (the fused projection's
// output and its gradient). out (B, T, H, D) dense. Query t attends to keys j with t - window <= j <= t
// (window + 1 keys, as FA3's window_size=(window, 0); window >= T is plain causal). Scores are scale * q.k,
// softmaxed per query. lse (B, H, T), in the accumulation type (f32 for f32/bf16, f64 for f64): log-sum-exp
// of each query's scaled scores, saved for the backward pass.
int64_t attention_workspace_bytes(Device device, DType dtype, int64_t batch, int64_t seq, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim, int64_t window);
void attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v, int64_t window,
                       double scale, TensorView workspace);
// Writes d_q, d_k, d_v (same shapes as q, k, v) from d_out and the forward's q, k, v, out, lse. No gradient
// may alias an input.
void attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                        HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace);

// ---- MLP activation ----
// out = relu(x)^2, elementwise. out may alias x.
void relu_squared_forward(TensorView out, TensorView x);
// d_x = 2 sqrt(out) d_out, out = relu(x)^2 being what the forward wrote (2 sqrt(out) is 2 relu(x) exactly in
// binary floating point barring underflow, so x need not be kept). d_x may alias d_out.
void relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out);
// nanochat's MLP with its activation inside the GEMMs (kernels/mlp_gemm.h says which GEMM the GPU runs).
// act = relu(x w^T)^2: x (N, K), w (M, K), act (N, M); act must not alias x.
void linear_relu_squared_forward(TensorView act, TensorView x, TensorView w);
// d_pre = (d_y w) * 2 sqrt(act): the gradient of pre through act = relu(pre)^2 and y = act w^T, with d_y
// (N, K), w (K, M), act and d_pre (N, M); d_pre aliases neither d_y nor act. (w's gradient is a matmul.)
void relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView w, TensorView act);

// ---- nanochat's smear: mix the previous token's embedding into each token ----
// x (B, T, C) normalised embeddings, gate_weight (1, G) with G = 24 channels, lambda (1).
//   out[:, 0] = x[:, 0];  out[:, t] = x[:, t] + lambda * sigmoid(x[:, t, :G] . gate_weight) * x[:, t-1]
// gate_sigmoid (B, T) keeps the sigmoid for the backward pass (column 0 unused). out must not alias x.
void smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView gate_weight,
                   TensorView lambda);
// d_x (B, T, C) is written and must not alias d_out (row t reads d_out[t + 1]); d_gate_weight (1, G) and
// d_lambda (1) are added to.
void smear_backward(TensorView d_x, TensorView d_gate_weight, TensorView d_lambda, TensorView d_out,
                    TensorView x, TensorView gate_sigmoid, TensorView gate_weight, TensorView lambda);

// ---- value embeddings with their gate (nanochat's value residual) ----
// v (N, Hkv, D) += 3 * sigmoid(u[:, :G] @ gate_weight^T) (N, Hkv) * table[ids] seen as (N, Hkv, D), in place;
// v (and the backward's d_v) is a HeadSlice with N = B * T (the model's is inside the fused projection's
// output), or a dense (N, Hkv, D).
// u (N, C) is the block's normalised input, gate_weight (Hkv, G) with G = 12, table (V, Hkv*D), ids (N).
// gate_sigmoid (N, Hkv) keeps the sigmoid for the backward pass.
void value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                              TensorView table, TensorView ids);
// d_v is the gradient of the mixed v (it is also that of the projected v, unchanged). Adds to d_u[:, :G],
// d_gate_weight and d_table (scattered by ids in token order).
void value_embed_gate_backward(TensorView d_u, TensorView d_gate_weight, TensorView d_table, HeadSlice d_v,
                               TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                               TensorView table, TensorView ids);

// ---- the per-layer residual mix with the RMSNorm that follows it, one pass ----
// residual = resid_lambda * x + x0_lambda * x0 (1-element lambda views: parameters, read on the device);
// out = rmsnorm(residual) with scale 1 and rstd (rows) as rmsnorm_forward. x may be x0 (block 0).
void residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                  TensorView x0, TensorView resid_lambda, TensorView x0_lambda);
// The gradient of the mixed residual is g = d_residual + rmsnorm_backward(d_out, out, rstd) (its own
// gradient from the block above plus the norm's). Then d_x = resid_lambda * g, written over d_residual
// (d_x must be d_residual: the op works in place); d_x0 += x0_lambda * g; d_resid_lambda += sum(g * x);
// d_x0_lambda += sum(g * x0).
void residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView d_resid_lambda,
                                   TensorView d_x0_lambda, TensorView d_out, TensorView out, TensorView rstd,
                                   TensorView x, TensorView x0, TensorView resid_lambda,
                                   TensorView x0_lambda);

// ---- backout: subtract a scaled mid-network snapshot before the final norm ----
// out = x - lambda * x_backout. out may alias x.
void backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView lambda);
// The gradient of x is d_out itself. Writes d_x_backout = -lambda * d_out; d_lambda += -sum(d_out *
// x_backout).
void backout_backward(TensorView d_x_backout, TensorView d_lambda, TensorView d_out, TensorView x_backout,
                      TensorView lambda);

// ---- loss: logit softcap fused with cross-entropy ----
// logits (N, V) hold the raw logits x. With z = softcap * tanh(x / softcap): for each row with targets[n] !=
// -1, losses[n] = logsumexp(z[n]) - z[n, targets[n]]; rows with target -1 get loss 0. lse (N) keeps
// logsumexp(z[n]). targets (N) i32. What the forward leaves in logits depends on the backend
// (softcap_leaves_capped_logits): the CPU replaces x by z in place (fp32/f64, so z loses nothing); the GPU
// leaves x, because bf16 would round z (up to ~3 % on a softmax probability near |z| = softcap), as nanochat
// caps fp32 copies of its bf16 logits. For evaluation; training uses the forward-backward below.
void softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                   double softcap);
// Whether the loss forward leaves z (true: the CPU) or the raw logits x (false: the GPU) in its logits.
bool softcap_leaves_capped_logits(Device device);
// The forward above and the gradient of loss_scale * mean(losses over the rows whose target is not -1) with
// respect to the raw logits, in one pass over them: losses and lse as the forward writes them, and logits
// overwritten by
//   d_logits = grad_scale * (softmax(z) - onehot(target)) * (1 - (z / softcap)^2),  0 for ignored rows,
// with grad_scale = loss_scale / (the number of targets that are not -1), or 0 when there are none.
void softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                            TensorView targets, double softcap, double loss_scale);

// Sum of losses over rows whose target is not -1, and how many such rows there are; the mean loss is
// sum / count (count 0 means every target was ignored). Read back to the host.
struct LossSum {
  double sum = 0;
  int64_t count = 0;
};
LossSum sum_loss(TensorView losses, TensorView targets);

// ---- optimizer (nanochat's AdamW and Muon; all in place, per parameter or per matrix) ----
struct AdamWStep {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  int64_t step = 1;  // t, counted from 1, for the bias corrections
};
// PyTorch's AdamW: p *= 1 - lr*wd; m = lerp(m, g, 1-beta1); v = lerp(v, g^2, 1-beta2);
// p -= lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps). All four tensors share one shape.
void adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                  const AdamWStep& hyper);
// Muon's Nesterov momentum: momentum_buffer = lerp(momentum_buffer, grad, 1 - mu);
// update = lerp(grad, momentum_buffer, mu). update may alias grad.
void muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad, double momentum);
// MuonEq on x (m, n): every row scaled to the RMS row norm ||x||_F / sqrt(m) (row norms floored at 1e-6).
void muon_equilibrate_rows(TensorView x);
// x /= ||x||_F * multiplier + eps (Polar Express's starting normalisation).
void normalize_frobenius(TensorView x, double multiplier, double eps);
// x *= target_norm / max(||x||_F, eps) (Muon+'s renormalisation).
void rescale_frobenius(TensorView x, double target_norm, double eps);
// NorMuon's variance reduction of the orthogonalised update g (m, n) with its second-moment state:
// second_moment (m, 1) reduces over columns (per-row statistics, m >= n), (1, n) over rows (m < n).
//   v = mean(g^2) along the reduced dim; s = lerp(s, v, 1 - beta2); step = rsqrt(max(s, 1e-10));
//   g *= step * ||g||_F / max(||g * step||_F, 1e-10)  (keeps the Frobenius norm, reshapes it).
void normuon_variance_reduce(TensorView g, TensorView second_moment, double beta2);
// Muon's update with cautious weight decay: p -= lr * update + lr * weight_decay * p * [update * p >= 0].
void cautious_weight_decay_step(TensorView param, TensorView update, double lr, double weight_decay);
// sum(x^2) over every element, in double, read back to the host: one tensor's share of the global gradient
// norm (the caller adds the tensors' shares, then takes the square root). Deterministic: the same bits for
// any thread count on the CPU (a fixed blocking summed in double), and on every run on the GPU.
double squared_norm(TensorView x);

// ---- a step's scalars, kept on the device until the step's one read-back (data parallelism) ----
// total (1) f64 on x's device += squared_norm(x): the same sum, added where it was computed.
void add_squared_norm(TensorView total, TensorView x);
// total (1) f64 on the device of losses += sum / count of sum_loss(losses, targets), the mean loss
// GPT::forward returns (NaN when every target is ignored), computed with the same bits.
void add_mean_loss(TensorView total, TensorView losses, TensorView targets);

}  // namespace nanoforge::ops
