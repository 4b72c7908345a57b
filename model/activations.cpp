// plan_activations: the activation arena layout. The attention workspace is sized for the widest window.
#include "model/activations.h"

#include <algorithm>

#include "kernels/ops.h"
#include "model/fp8_linear.h"

namespace nanoforge {

DType statistics_dtype(DType activation_dtype) {
  return activation_dtype == DType::kBF16 ? DType::kF32 : activation_dtype;
}

VkqSlices vkq_slices(const TensorView& vkq, int64_t kv_heads) {
  return {HeadSlice(vkq, 0, kv_heads), HeadSlice(vkq, kv_heads, kv_heads),
          HeadSlice(vkq, 2 * kv_heads, vkq.shape[2] - 2 * kv_heads)};
}

void plan_activations(const GPTConfig& config, int64_t batch, int64_t seq, ArenaAllocator& arena,
                      Activations& a) {
  const int64_t N = batch * seq, C = config.n_embd, H = config.n_head, Hkv = config.n_kv_head;
  const int64_t D = config.head_dim(), V = config.vocab_size, hidden = config.mlp_dim();
  const DType stat = statistics_dtype(arena.dtype());
  a.batch = batch;
  a.seq = seq;
  a.ids = arena.take({N}, DType::kI32);
  a.targets = arena.take({N}, DType::kI32);
  a.embedding = arena.take({N, C});
  a.embedding_rstd = arena.take({N}, stat);
  a.smear_gate = arena.take({batch, seq}, stat);
  a.x0 = arena.take({N, C});
  a.layers.resize(static_cast<size_t>(config.n_layer));
  for (int64_t i = 0; i < config.n_layer; ++i) {
    LayerActivations& l = a.layers[i];
    l.residual = arena.take({N, C});
    l.norm1 = arena.take({N, C});
    l.rstd1 = arena.take({N}, stat);
    l.vkq = arena.take({batch, seq, 2 * Hkv + H, D});
    l.q_rstd = arena.take({N * H}, stat);
    l.k_rstd = arena.take({N * Hkv}, stat);
    if (config.has_value_embed(i)) l.value_gate = arena.take({N, Hkv}, stat);
    l.attention = arena.take({batch, seq, H, D});
    l.lse = arena.take({batch, H, seq}, stat);
    l.norm2 = arena.take({N, C});
    l.rstd2 = arena.take({N}, stat);
    l.fc_act = arena.take({N, hidden});
  }
  a.final_norm = arena.take({N, C});
  a.final_rstd = arena.take({N}, stat);
  a.logits = arena.take({N, V});
  a.logits_lse = arena.take({N}, stat);
  a.losses = arena.take({N}, stat);
  int64_t workspace_bytes = 0;
  for (int64_t i = 0; i < config.n_layer; ++i) {
    workspace_bytes =
        std::max(workspace_bytes, ops::attention_workspace_bytes(arena.device(), arena.dtype(), batch, seq, H,
                                                                 Hkv, D, config.window(i)));
  }
  a.attention_workspace = arena.take_bytes(workspace_bytes);
  a.d_residual = arena.take({N, C});
  a.d_x0 = arena.take({N, C});
  a.d_norm = arena.take({N, C});
  a.d_backout = arena.take({N, C});
  a.d_vkq = arena.take({batch, seq, 2 * Hkv + H, D});
  a.d_attention = arena.take({batch, seq, H, D});
  a.d_fc = arena.take({N, hidden});
}

int64_t activation_bytes(const GPTConfig& config, Device device, DType dtype, int64_t batch, int64_t seq,
                         bool fp8) {
  ArenaAllocator measure(device, dtype);
  Activations activations;
  plan_activations(config, batch, seq, measure, activations);
  if (fp8) {
    Fp8Scratch scratch;
    plan_fp8_scratch(config, Fp8Linears::of(config), batch * seq, measure, scratch);
  }
  return measure.used_bytes();
}

}  // namespace nanoforge
