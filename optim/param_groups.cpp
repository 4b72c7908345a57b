// nanochat_param_groups: the groups, rates and betas of GPT.setup_optimizer.
#include "optim/param_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace nanoforge {

double ParamGroup::lr_shape_scale() const {
  return std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
}

std::vector<ParamGroup> nanochat_param_groups(const GPTConfig& config, const ParamLayout& layout,
                                              const OptimizerHyperparameters& hyper, double batch_lr_scale,
                                              double weight_decay) {
  // nanochat scales the embedding and unembedding rates by (d_model / 768)^-0.5, tuned at d_model 768.
  const double dmodel_lr_scale = std::pow(static_cast<double>(config.n_embd) / 768.0, -0.5);
  constexpr double kAdamEps = 1e-10;
  const std::vector<std::string> order = layout.state_dict_order();
  auto params_of_kind = [&](ParamKind kind) {
    std::vector<const ParamInfo*> params;
    for (const std::string& name : order) {
      const ParamInfo& info = layout.at(name);
      if (info.kind == kind) params.push_back(&info);
    }
    return params;
  };
  auto adamw = [&](std::string label, ParamKind kind, double lr, double beta1, double beta2, double wd) {
    ParamGroup group;
    group.kind = GroupKind::kAdamW;
    group.label = std::move(label);
    group.params = params_of_kind(kind);
    group.initial_lr = lr;
    group.beta1 = beta1;
    group.beta2 = beta2;
    group.eps = kAdamEps;
    group.weight_decay = wd;
    return group;
  };
  std::vector<ParamGroup> groups;
  groups.push_back(adamw("unembedding", ParamKind::kUnembedding,
                         hyper.unembedding_lr * batch_lr_scale * dmodel_lr_scale, 0.8, 0.96, 0.01));
  groups.push_back(adamw("embedding", ParamKind::kEmbedding,
                         hyper.embedding_lr * batch_lr_scale * dmodel_lr_scale, 0.8, 0.995, 0.001));
  groups.push_back(adamw("value_embeds", ParamKind::kValueEmbedding,
                         hyper.embedding_lr * batch_lr_scale * dmodel_lr_scale * 0.5, 0.8, 0.995, 0.01));
  groups.push_back(
      adamw("resid", ParamKind::kResidLambdas, hyper.scalar_lr * batch_lr_scale * 0.01, 0.8, 0.95, 0.05));
  groups.push_back(adamw("x0", ParamKind::kX0Lambdas, hyper.scalar_lr * batch_lr_scale, 0.96, 0.95, 0.0));
  // The smear scalars: a fixed 0.2, not scaled by batch or width.
  groups.push_back(adamw("smear", ParamKind::kSmear, 0.2, 0.8, 0.95, 0.0));
  // nanochat lists smear_gate, smear_lambda, backout_lambda in that order.
  std::stable_sort(groups.back().params.begin(), groups.back().params.end(),
                   [](const ParamInfo* a, const ParamInfo* b) {
                     auto rank = [](const std::string& name) {
                       return name == "smear_gate.weight" ? 0 : name == "smear_lambda" ? 1 : 2;
                     };
                     return rank(a->name) < rank(b->name);
                   });

  std::map<std::pair<int64_t, int64_t>, std::vector<const ParamInfo*>> by_shape;  // sorted like Python tuples
  for (const ParamInfo* info : params_of_kind(ParamKind::kMatrix)) {
    by_shape[{info->shape[0], info->shape[1]}].push_back(info);
  }
  for (auto& [shape, params] : by_shape) {
    ParamGroup group;
    group.kind = GroupKind::kMuon;
    group.label = fmt::format("muon ({}, {})", shape.first, shape.second);
    group.params = std::move(params);
    group.initial_lr = hyper.matrix_lr * batch_lr_scale;
    group.weight_decay = weight_decay;
    group.rows = shape.first;
    group.cols = shape.second;
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace nanoforge
