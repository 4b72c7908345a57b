// What each op of kernels/ops.h costs as the CUDA backend runs it — the work its kernels do, the DRAM bytes
// they move, how many kernels it launches — and the cost-recording mode that collects those costs from a
// real sequence of op calls without running one: while a ScopedCostRecording lives on a thread, every op
// that thread calls is handed to the sink (under the op profiler's name) instead of running, and device
// memory is reserved address space, never backed, so a d20 step is recorded on any machine in milliseconds.
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace nanoforge::ops {

// Which peak an op's arithmetic runs against, at which efficiency: the tensor cores (cuBLASLt's GEMMs, our
// MLP GEMM, attention) or the CUDA cores.
enum class CostClass : uint8_t { kGemm, kOwnGemm, kAttentionForward, kAttentionBackward, kVector };

struct OpCost {
  CostClass kind = CostClass::kVector;
  double tensor_flops = 0;  // tensor-core multiply-adds x 2, as the kernels execute them (masked tiles too)
  double vector_flops = 0;  // CUDA-core fp32 operations (transcendentals counted by their instruction cost)
  double sfu_ops = 0;       // special-function-unit instructions (ex2, rcp: __expf, __fdividef) issued
  double bytes = 0;         // DRAM traffic: each operand read or written once (re-reads assumed to hit L2)
  int kernels = 1;          // launches the op makes (each costs at least a kernel's minimum time)
  bool host_sync = false;   // the host waits for a value read back (sum_loss, squared_norm)
  int64_t gemm_rows = 0, gemm_cols = 0;  // a GEMM's output (M, N): how many output tiles fill the GPU
};

// Receives the ops recorded on its thread: `op` is the op profiler's name of the op.
class OpCostSink {
 public:
  virtual ~OpCostSink() = default;
  virtual void record(const char* op, const OpCost& cost) = 0;
};

// Cost recording on this thread for the scope's lifetime (scopes do not nest).
class ScopedCostRecording {
 public:
  explicit ScopedCostRecording(OpCostSink& sink);
  ~ScopedCostRecording();
  ScopedCostRecording(const ScopedCostRecording&) = delete;
  ScopedCostRecording& operator=(const ScopedCostRecording&) = delete;
};

// This thread's sink while recording, else nullptr.
OpCostSink* cost_recording();

// One function per op, with the op's own arguments.
namespace cost {
OpCost fill(TensorView t, double value);
OpCost copy(TensorView dst, TensorView src);
OpCost accumulate(TensorView into, TensorView add);
OpCost convert(TensorView dst, TensorView src);
OpCost matmul(TensorView out, TensorView a, Transpose transpose_a, TensorView b, Transpose transpose_b,
              double alpha, double beta);
OpCost embedding_forward(TensorView out, TensorView table, TensorView ids);
OpCost embedding_backward(TensorView d_table, TensorView d_out, TensorView ids);
OpCost rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale);
OpCost rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                        Accumulate mode);
OpCost rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView sin, double scale);
OpCost rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                               double scale);
OpCost attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v,
                         int64_t window, double scale, TensorView workspace);
OpCost attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                          HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                          double scale, TensorView workspace);
// cuDNN's fused attention (model.attention=cudnn): the same tile-pair work as the forward; a backward with
// FlashAttention-2's five tile GEMMs. Its efficiency is assumed to be the flash kernels' (not modelled
// apart).
OpCost cudnn_attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v,
                               int64_t window, double scale, TensorView workspace);
OpCost cudnn_attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                                HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                                double scale, TensorView workspace);
OpCost relu_squared_forward(TensorView out, TensorView x);
OpCost relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out);
// Our MLP GEMM (kernels/cuda/mlp_gemm.cu): the GEMM's FLOPs at our GEMM's efficiency, its operands and
// output, and the backward's read of act.
OpCost linear_relu_squared_forward(TensorView act, TensorView x, TensorView w);
OpCost relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView w, TensorView act);
OpCost smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView gate_weight,
                     TensorView lambda);
OpCost smear_backward(TensorView d_x, TensorView d_gate_weight, TensorView d_lambda, TensorView d_out,
                      TensorView x, TensorView gate_sigmoid, TensorView gate_weight, TensorView lambda);
OpCost value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                                TensorView table, TensorView ids);
OpCost value_embed_gate_backward(TensorView d_u, TensorView d_gate_weight, TensorView d_table, HeadSlice d_v,
                                 TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                                 TensorView table, TensorView ids);
OpCost residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                    TensorView x0, TensorView resid_lambda, TensorView x0_lambda);
OpCost residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView d_resid_lambda,
                                     TensorView d_x0_lambda, TensorView d_out, TensorView out,
                                     TensorView rstd, TensorView x, TensorView x0, TensorView resid_lambda,
                                     TensorView x0_lambda);
OpCost backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView lambda);
OpCost backout_backward(TensorView d_x_backout, TensorView d_lambda, TensorView d_out, TensorView x_backout,
                        TensorView lambda);
OpCost softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                     double softcap);
OpCost softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                              TensorView targets, double softcap, double loss_scale);
OpCost sum_loss(TensorView losses, TensorView targets);
OpCost adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                    const AdamWStep& hyper);
OpCost muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad,
                              double momentum);
OpCost muon_equilibrate_rows(TensorView x);
OpCost normalize_frobenius(TensorView x, double multiplier, double eps);
OpCost rescale_frobenius(TensorView x, double target_norm, double eps);
OpCost normuon_variance_reduce(TensorView g, TensorView second_moment, double beta2);
OpCost cautious_weight_decay_step(TensorView param, TensorView update, double lr, double weight_decay);
OpCost squared_norm(TensorView x);
OpCost add_squared_norm(TensorView total, TensorView x);
OpCost add_mean_loss(TensorView total, TensorView losses, TensorView targets);

// The (query tile, key tile) pairs the flash-attention kernels visit for one (batch, head): 64-row tiles,
// from the first key tile a query tile's window reaches to the diagonal (kernels/cuda/flash_attention*.cu).
int64_t attention_tile_pairs(int64_t seq, int64_t window);
inline constexpr int64_t kAttentionTileRows = 64;
}  // namespace cost

}  // namespace nanoforge::ops
