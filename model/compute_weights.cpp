// The compute copy's layout (matrices packed in master order, each aligned, runs merged where both buffers
// are contiguous), its views, and its refresh.
#include "model/compute_weights.h"

#include <string_view>

#include "kernels/ops.h"

namespace nanoforge {

bool is_gemm_matrix(const ParamInfo& param) {
  if (param.kind == ParamKind::kUnembedding) return true;
  // Block matrices, except the value-embedding gate: value_embed_gate reads that one in fp32.
  return param.kind == ParamKind::kMatrix && !std::string_view(param.name).ends_with("attn.ve_gate.weight");
}

namespace {

// c_k and c_q continue c_v (their predecessors in the master) in the copy: the three are one GEMM's matrix.
bool continues_vkq(const ParamInfo& param) {
  const std::string_view name = param.name;
  return name.ends_with("attn.c_k.weight") || name.ends_with("attn.c_q.weight");
}

}  // namespace

ComputeWeightLayout compute_weight_layout(const ParamLayout& layout, DType dtype) {
  ComputeWeightLayout compute;
  compute.dtype = dtype;
  const int64_t alignment_elements = ArenaAllocator::kAlignmentBytes / dtype_bytes(dtype);
  const std::vector<ParamInfo>& params = layout.params();
  compute.copy_offset.assign(params.size(), -1);
  int64_t used = 0;
  bool previous_is_matrix = false;  // then the previous parameter ends where this one starts in the master
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& param = params[i];
    if (!is_gemm_matrix(param)) {
      previous_is_matrix = false;
      continue;
    }
    NANOFORGE_CHECK(!continues_vkq(param) || previous_is_matrix, "{} does not follow its layer's c_v / c_k",
                    param.name);
    const int64_t start = continues_vkq(param)
                              ? used
                              : (used + alignment_elements - 1) / alignment_elements * alignment_elements;
    if (previous_is_matrix && start == used) {
      compute.runs.back().numel += param.numel;
    } else {
      compute.runs.push_back({param.offset, start, param.numel});
    }
    compute.copy_offset[i] = start;
    used = start + param.numel;
    previous_is_matrix = true;
  }
  compute.bytes = used * dtype_bytes(dtype);
  return compute;
}

ModelWeights with_compute_matrices(const ModelWeights& weights, const GPTConfig& config,
                                   const ParamLayout& layout, const ComputeWeightLayout& compute,
                                   const DeviceBuffer& copy) {
  auto view = [&](const std::string& name) {
    const ParamInfo& info = layout.at(name);
    const int64_t offset = compute.copy_offset[static_cast<size_t>(&info - layout.params().data())];
    NANOFORGE_CHECK(offset >= 0, "{} has no compute copy", name);
    void* data = static_cast<char*>(copy.data()) + offset * dtype_bytes(compute.dtype);
    return TensorView(data, std::span<const int64_t>(info.shape), compute.dtype, copy.device());
  };
  ModelWeights w = weights;
  w.lm_head = view("lm_head.weight").rows(0, config.vocab_size);
  for (int64_t i = 0; i < config.n_layer; ++i) {
    BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    b.c_vkq = stacked_rows({view(layer_param(i, "attn.c_v")), view(layer_param(i, "attn.c_k")),
                            view(layer_param(i, "attn.c_q"))});
    b.c_proj = view(layer_param(i, "attn.c_proj"));
    b.fc = view(layer_param(i, "mlp.c_fc"));
    b.mlp_proj = view(layer_param(i, "mlp.c_proj"));
  }
  return w;
}

void refresh_compute_copy(const ComputeWeightLayout& compute, TensorView master, const DeviceBuffer& copy) {
  for (const ComputeWeightLayout::Run& run : compute.runs) {
    void* data = static_cast<char*>(copy.data()) + run.copy_offset * dtype_bytes(compute.dtype);
    ops::convert(TensorView(data, {run.numel}, compute.dtype, copy.device()),
                 master.rows(run.master_offset, run.numel));
  }
}

}  // namespace nanoforge
