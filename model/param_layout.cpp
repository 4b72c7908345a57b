// ParamLayout: builds nanochat's parameter table in backward order and derives the counts.
#include "model/param_layout.h"

#include <fmt/format.h>

#include "support/check.h"
#include "support/number_format.h"

namespace nanoforge {

const char* param_kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::kEmbedding:
      return "embedding";
    case ParamKind::kValueEmbedding:
      return "value_embeds";
    case ParamKind::kUnembedding:
      return "unembedding";
    case ParamKind::kResidLambdas:
      return "resid";
    case ParamKind::kX0Lambdas:
      return "x0";
    case ParamKind::kSmear:
      return "smear";
    case ParamKind::kMatrix:
      return "matrix";
  }
  return "?";
}

std::string layer_param(int64_t layer, const char* suffix) {
  return fmt::format("transformer.h.{}.{}.weight", layer, suffix);
}

std::string value_embed_param(int64_t layer) {
  return fmt::format("value_embeds.{}.weight", layer);
}

ParamLayout::ParamLayout(const GPTConfig& config) : config_(config) {
  const int64_t C = config.n_embd, V = config.padded_vocab_size(), L = config.n_layer;
  const int64_t q_dim = config.n_head * config.head_dim(), kv_dim = config.kv_dim();
  // backout_lambda's gradient is final right after lm_head's, but it sits with the scalars: one float between
  // lm_head and the blocks would leave every block matrix (and its fp32 gradient, a cuBLASLt output) only
  // 4-byte aligned.
  add("lm_head.weight", {V, C}, ParamKind::kUnembedding);
  for (int64_t i = L - 1; i >= 0; --i) {
    add(layer_param(i, "mlp.c_proj"), {C, config.mlp_dim()}, ParamKind::kMatrix);
    add(layer_param(i, "mlp.c_fc"), {config.mlp_dim(), C}, ParamKind::kMatrix);
    add(layer_param(i, "attn.c_proj"), {C, q_dim}, ParamKind::kMatrix);
    if (config.has_value_embed(i)) {
      add(value_embed_param(i), {V, kv_dim}, ParamKind::kValueEmbedding);
      add(layer_param(i, "attn.ve_gate"), {config.n_kv_head, kValueGateChannels}, ParamKind::kMatrix);
    }
    add(layer_param(i, "attn.c_v"), {kv_dim, C}, ParamKind::kMatrix);
    add(layer_param(i, "attn.c_k"), {kv_dim, C}, ParamKind::kMatrix);
    add(layer_param(i, "attn.c_q"), {q_dim, C}, ParamKind::kMatrix);
  }
  add("resid_lambdas", {L}, ParamKind::kResidLambdas);
  add("x0_lambdas", {L}, ParamKind::kX0Lambdas);
  add("backout_lambda", {1}, ParamKind::kSmear);
  add("smear_lambda", {1}, ParamKind::kSmear);
  add("smear_gate.weight", {1, kSmearGateChannels}, ParamKind::kSmear);
  add("transformer.wte.weight", {V, C}, ParamKind::kEmbedding);
}

void ParamLayout::add(std::string name, std::vector<int64_t> shape, ParamKind kind) {
  ParamInfo info;
  info.name = std::move(name);
  info.numel = 1;
  for (int64_t d : shape)
    info.numel *= d;
  info.shape = std::move(shape);
  info.offset = total_numel_;
  info.kind = kind;
  total_numel_ += info.numel;
  params_.push_back(std::move(info));
}

const ParamInfo* ParamLayout::find(const std::string& name) const {
  for (const ParamInfo& info : params_) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

const ParamInfo& ParamLayout::at(const std::string& name) const {
  const ParamInfo* info = find(name);
  NANOFORGE_CHECK(info != nullptr, "no parameter named {}", name);
  return *info;
}

std::vector<std::string> ParamLayout::state_dict_order() const {
  std::vector<std::string> names = {"resid_lambdas", "x0_lambdas", "smear_lambda", "backout_lambda",
                                    "transformer.wte.weight"};
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    for (const char* suffix : {"attn.c_q", "attn.c_k", "attn.c_v", "attn.c_proj"}) {
      names.push_back(layer_param(i, suffix));
    }
    if (config_.has_value_embed(i)) names.push_back(layer_param(i, "attn.ve_gate"));
    names.push_back(layer_param(i, "mlp.c_fc"));
    names.push_back(layer_param(i, "mlp.c_proj"));
  }
  names.emplace_back("lm_head.weight");
  names.emplace_back("smear_gate.weight");
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    if (config_.has_value_embed(i)) names.push_back(value_embed_param(i));
  }
  return names;
}

ParamCounts ParamLayout::counts() const {
  ParamCounts counts;
  for (const ParamInfo& info : params_) {
    switch (info.kind) {
      case ParamKind::kEmbedding:
        counts.wte += info.numel;
        break;
      case ParamKind::kValueEmbedding:
        counts.value_embeds += info.numel;
        break;
      case ParamKind::kUnembedding:
        counts.lm_head += info.numel;
        break;
      case ParamKind::kMatrix:
        counts.transformer_matrices += info.numel;
        break;
      default:
        counts.scalars += info.numel;
        break;
    }
    counts.total += info.numel;
  }
  return counts;
}

std::string format_param_counts(const ParamCounts& counts) {
  const std::pair<const char*, int64_t> rows[] = {
      {"wte", counts.wte},         {"value_embeds", counts.value_embeds},
      {"lm_head", counts.lm_head}, {"transformer_matrices", counts.transformer_matrices},
      {"scalars", counts.scalars}, {"total", counts.total}};
  std::string text;
  for (const auto& [name, count] : rows)
    text += fmt::format("{:<24}: {:>15}\n", name, with_thousands(count));
  return text;
}

}  // namespace nanoforge
