// The CPU backend: every op of kernels/ops.h, templated on the element type (float for training, double for
// gradient checks against finite differences). Contracts and shapes are documented in kernels/ops.h; the
// dispatcher (kernels/ops.cpp) has checked devices and dtypes before these run.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace nanoforge::cpu {

using ops::Accumulate;
using ops::Transpose;

template <class T>
void fill(TensorView t, double value);
template <class T>
void copy(TensorView dst, TensorView src);
template <class T>
void accumulate(TensorView into, TensorView add);
template <class Dst, class Src>
void convert(TensorView dst, TensorView src);

template <class T>
void matmul(TensorView out, TensorView a, Transpose transpose_a, TensorView b, Transpose transpose_b,
            double alpha, double beta);

template <class T>
void embedding_forward(TensorView out, TensorView table, TensorView ids);
template <class T>
void embedding_backward(TensorView d_table, TensorView d_out, TensorView ids);

template <class T>
void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale);
template <class T>
void rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                      Accumulate mode);

template <class T>
void rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView sin, double scale);
template <class T>
void rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                             double scale);

int64_t attention_workspace_bytes(DType dtype, int64_t seq, int64_t window);
template <class T>
void attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v, int64_t window,
                       double scale, TensorView workspace);
template <class T>
void attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                        HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace);

template <class T>
void relu_squared_forward(TensorView out, TensorView x);
template <class T>
void relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out);

template <class T>
void smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView gate_weight,
                   TensorView lambda);
template <class T>
void smear_backward(TensorView d_x, TensorView d_gate_weight, TensorView d_lambda, TensorView d_out,
                    TensorView x, TensorView gate_sigmoid, TensorView gate_weight, TensorView lambda);

template <class T>
void value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                              TensorView table, TensorView ids);
template <class T>
void value_embed_gate_backward(TensorView d_u, TensorView d_gate_weight, TensorView d_table, HeadSlice d_v,
                               TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                               TensorView table, TensorView ids);

template <class T>
void residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                  TensorView x0, TensorView resid_lambda, TensorView x0_lambda);
template <class T>
void residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView d_resid_lambda,
                                   TensorView d_x0_lambda, TensorView d_out, TensorView out, TensorView rstd,
                                   TensorView x, TensorView x0, TensorView resid_lambda,
                                   TensorView x0_lambda);

template <class T>
void backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView lambda);
template <class T>
void backout_backward(TensorView d_x_backout, TensorView d_lambda, TensorView d_out, TensorView x_backout,
                      TensorView lambda);

template <class T>
void softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                   double softcap);
template <class T>
void softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                            TensorView targets, double softcap, double loss_scale);
template <class T>
ops::LossSum sum_loss(TensorView losses, TensorView targets);

template <class T>
void adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                  const ops::AdamWStep& hyper);
template <class T>
void muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad, double momentum);
template <class T>
void muon_equilibrate_rows(TensorView x);
template <class T>
void normalize_frobenius(TensorView x, double multiplier, double eps);
template <class T>
void rescale_frobenius(TensorView x, double target_norm, double eps);
template <class T>
void normuon_variance_reduce(TensorView g, TensorView second_moment, double beta2);
template <class T>
void cautious_weight_decay_step(TensorView param, TensorView update, double lr, double weight_decay);
template <class T>
double squared_norm(TensorView x);

}  // namespace nanoforge::cpu
