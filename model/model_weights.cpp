// model_weights: one view per parameter, by nanochat's names.
#include "model/model_weights.h"

namespace nanoforge {

TensorView stacked_rows(std::initializer_list<TensorView> matrices) {
  const TensorView& first = *matrices.begin();
  int64_t rows = 0;
  const char* end = static_cast<const char*>(first.data);
  for (const TensorView& m : matrices) {
    NANOFORGE_CHECK(m.rank == 2 && m.shape[1] == first.shape[1] && m.dtype == first.dtype &&
                        m.device == first.device && static_cast<const char*>(m.data) == end,
                    "stacked_rows: {} does not continue the matrices before it ({})", m.describe(),
                    first.describe());
    rows += m.shape[0];
    end += m.bytes();
  }
  return TensorView(first.data, {rows, first.shape[1]}, first.dtype, first.device);
}

ModelWeights model_weights(const GPTConfig& config, const ParamLayout& layout, void* flat, DType dtype,
                           Device device) {
  auto view = [&](const std::string& name) {
    const ParamInfo& info = layout.at(name);
    void* data = static_cast<char*>(flat) + info.offset * dtype_bytes(dtype);
    return TensorView(data, std::span<const int64_t>(info.shape), dtype, device);
  };
  ModelWeights w;
  w.wte = view("transformer.wte.weight");
  w.lm_head = view("lm_head.weight").rows(0, config.vocab_size);
  w.smear_gate = view("smear_gate.weight");
  w.smear_lambda = view("smear_lambda");
  w.backout_lambda = view("backout_lambda");
  const TensorView resid_lambdas = view("resid_lambdas"), x0_lambdas = view("x0_lambdas");
  for (int64_t i = 0; i < config.n_layer; ++i) {
    BlockWeights b;
    b.c_vkq = stacked_rows({view(layer_param(i, "attn.c_v")), view(layer_param(i, "attn.c_k")),
                            view(layer_param(i, "attn.c_q"))});
    b.c_proj = view(layer_param(i, "attn.c_proj"));
    if (config.has_value_embed(i)) {
      b.ve_gate = view(layer_param(i, "attn.ve_gate"));
      b.value_embed = view(value_embed_param(i));
    }
    b.fc = view(layer_param(i, "mlp.c_fc"));
    b.mlp_proj = view(layer_param(i, "mlp.c_proj"));
    b.resid_lambda = resid_lambdas.rows(i, 1);
    b.x0_lambda = x0_lambdas.rows(i, 1);
    w.blocks.push_back(b);
  }
  return w;
}

}  // namespace nanoforge
