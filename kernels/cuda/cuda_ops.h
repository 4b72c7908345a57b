// The CUDA backend's half of kernels/ops.h: the same ops and contracts, in mixed precision. kernels/ops.cpp
// routes an op here when its tensors live on the GPU; each launcher checks its own dtypes.
//
// dtypes on the GPU (docs/kernels.md has the table):
//   activations and their gradients (x, out, q, k, v, logits, d_*)     bf16
//   per-row statistics kept for backward (rstd, lse, gate sigmoids, losses) f32
//   parameters read by non-GEMM ops (tables, gates, lambdas) and the
//   gradients written into them (d_table, d_gate_weight, d_*lambda)      f32 (the fp32 master weights)
//   rotary cos / sin tables                                              f32
//   ids, targets                                                         i32
//   matmul: a, b bf16; out bf16 or f32 (weight gradients accumulate in f32); fp32 accumulation
//   optimizer: param, grad, moments, momentum, second moment f32; Muon's update / orthogonalisation
//   matrix x bf16 (as nanochat orthogonalises in bf16) or f32
// Kernels run on the current device's default stream, in order; nothing here synchronises with the host
// except sum_loss and squared_norm, which return a value (add_mean_loss and add_squared_norm are their
// device-side twins).
#pragma once

#include "kernels/ops.h"

namespace nanoforge::cuda {

// ---- memory (memory_ops.cu) ----
void fill(TensorView t, double value);
void copy(TensorView dst, TensorView src);
void accumulate(TensorView into, TensorView add);
void convert(TensorView dst, TensorView src);  // f32 <-> bf16

// ---- dense algebra (matmul.cu, cuBLASLt) ----
void matmul(TensorView out, TensorView a, ops::Transpose transpose_a, TensorView b,
            ops::Transpose transpose_b, double alpha, double beta);

// ---- the MLP's GEMMs with ReLU² in their epilogues (mlp_gemm.cu; ops::MlpGemm::kFused) ----
void linear_relu_squared_forward(TensorView act, TensorView x, TensorView w);
void relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView w, TensorView act);

// ---- embeddings (embedding.cu) ----
void embedding_forward(TensorView out, TensorView table, TensorView ids);
void embedding_backward(TensorView d_table, TensorView d_out, TensorView ids);

// ---- normalisation (rmsnorm.cu) ----
void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale);
void rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                      ops::Accumulate mode);

// ---- rotary with the QK-norm (rotary_rmsnorm.cu) ----
void rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView sin, double scale);
void rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                             double scale);

// ---- attention (flash_attention*.cu) ----
int64_t attention_workspace_bytes(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads,
                                  int64_t head_dim, int64_t window);
void attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v, int64_t window,
                       double scale, TensorView workspace);
void attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                        HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace);

// ---- elementwise layers (relu_squared.cu, backout.cu) and the residual mix with its norm
// (residual_mix_rmsnorm.cu) ----
void relu_squared_forward(TensorView out, TensorView x);
void relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out);
void residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                  TensorView x0, TensorView resid_lambda, TensorView x0_lambda);
void residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView d_resid_lambda,
                                   TensorView d_x0_lambda, TensorView d_out, TensorView out, TensorView rstd,
                                   TensorView x, TensorView x0, TensorView resid_lambda,
                                   TensorView x0_lambda);
void backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView lambda);
void backout_backward(TensorView d_x_backout, TensorView d_lambda, TensorView d_out, TensorView x_backout,
                      TensorView lambda);

// ---- gates (smear.cu, value_embed_gate.cu) ----
void smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView gate_weight,
                   TensorView lambda);
void smear_backward(TensorView d_x, TensorView d_gate_weight, TensorView d_lambda, TensorView d_out,
                    TensorView x, TensorView gate_sigmoid, TensorView gate_weight, TensorView lambda);
void value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                              TensorView table, TensorView ids);
void value_embed_gate_backward(TensorView d_u, TensorView d_gate_weight, TensorView d_table, HeadSlice d_v,
                               TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                               TensorView table, TensorView ids);

// ---- loss (softcap_cross_entropy.cu) ----
void softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                   double softcap);
void softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                            TensorView targets, double softcap, double loss_scale);
ops::LossSum sum_loss(TensorView losses, TensorView targets);

// ---- optimizer (adamw.cu, muon_steps.cu) ----
void adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                  const ops::AdamWStep& hyper);
void muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad, double momentum);
void muon_equilibrate_rows(TensorView x);
void normalize_frobenius(TensorView x, double multiplier, double eps);
void rescale_frobenius(TensorView x, double target_norm, double eps);
void normuon_variance_reduce(TensorView g, TensorView second_moment, double beta2);
void cautious_weight_decay_step(TensorView param, TensorView update, double lr, double weight_decay);
double squared_norm(TensorView x);
void add_squared_norm(TensorView total, TensorView x);

// ---- a step's scalars on the device (step_sums.cu) ----
void add_mean_loss(TensorView total, TensorView losses, TensorView targets);

}  // namespace nanoforge::cuda
