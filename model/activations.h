// The activation plan of one (B, T): every tensor the forward pass keeps for the backward pass, and the
// backward pass's scratch, as views into one arena. Built twice by plan_activations — once to measure,
// once over the allocated buffer — so a step never allocates. Shapes use N = B*T rows. Activations and their
// gradients have the arena's dtype (bf16 on the GPU); per-row statistics (rstd, lse, gate sigmoids, losses)
// have the accumulation dtype, statistics_dtype (f32 for bf16).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device_buffer.h"
#include "kernels/head_slice.h"
#include "model/gpt_config.h"

namespace nanoforge {

struct LayerActivations {
  TensorView residual;      // (N, C) the block's output x; built in place: mix, + attention, + MLP
  TensorView norm1, rstd1;  // (N, C), (N): norm of the mixed input, read by q/k/v and the value gate
  // (B, T, 2 Hkv + H, D): the fused projection's output, heads v, k, q (its rows' order), then in place v
  // after the value embedding, k and q after rotary and QK-norm (vkq_slices).
  TensorView vkq;
  TensorView q_rstd, k_rstd;  // (N*H), (N*Hkv)
  TensorView value_gate;      // (N, Hkv) sigmoid of the value-embedding gate (value-embedding layers only)
  TensorView attention, lse;  // (B, T, H, D), (B, H, T)
  TensorView norm2, rstd2;    // (N, C), (N)
  // (N, 4C) relu(fc(norm2))^2; relu's input is not kept: its backward is 2 sqrt(fc_act) (kernels/ops.h).
  TensorView fc_act;
};

// The v, k and q heads of a (B, T, 2 Hkv + H, D) tensor laid out as the fused projection's output (a
// layer's vkq, or the backward's d_vkq).
struct VkqSlices {
  HeadSlice v, k, q;
};
VkqSlices vkq_slices(const TensorView& vkq, int64_t kv_heads);

struct Activations {
  int64_t batch = 0, seq = 0;
  TensorView ids, targets;               // (N) i32 copies of the step's inputs
  TensorView embedding, embedding_rstd;  // (N, C) normalised token embedding, (N)
  TensorView smear_gate;                 // (B, T) smear gate sigmoid
  TensorView x0;                         // (N, C) after smear: every block's x0 input
  std::vector<LayerActivations> layers;
  TensorView final_norm, final_rstd;  // (N, C), (N)
  TensorView logits;                  // (N, V) capped logits, then their gradient
  TensorView logits_lse, losses;      // (N), (N)
  TensorView attention_workspace;     // per-thread attention scratch
  // Backward scratch.
  TensorView d_residual, d_x0, d_norm, d_backout;  // (N, C)
  TensorView d_vkq;                                // (B, T, 2 Hkv + H, D): d_v, d_k, d_q as head slices
  TensorView d_attention;                          // (B, T, H, D)
  TensorView d_fc;                                 // (N, 4C)
};

// The dtype of the statistics kept with activations of `activation_dtype`, and of the rotary tables: f32 for
// bf16 (what the kernels accumulate in), else the activation dtype itself (f32 or f64 on the CPU).
DType statistics_dtype(DType activation_dtype);

// Assigns every view of `activations` from `arena` (its default dtype: the activation dtype) for (batch,
// seq).
void plan_activations(const GPTConfig& config, int64_t batch, int64_t seq, ArenaAllocator& arena,
                      Activations& activations);

// The bytes the plan of (batch, seq) takes on `device` with activations of `dtype`, measured, not allocated;
// with `fp8`, the FP8 GEMMs' scratch too (model/fp8_linear.h), as a model training in FP8 plans it.
int64_t activation_bytes(const GPTConfig& config, Device device, DType dtype, int64_t batch, int64_t seq,
                         bool fp8);

}  // namespace nanoforge
