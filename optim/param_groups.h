// nanochat's optimizer parameter groups (GPT.setup_optimizer): six AdamW groups — lm_head, wte, the value
// embeddings, resid_lambdas, x0_lambdas, and the smear scalars — then one Muon group per distinct matrix
// shape under transformer.h, shapes sorted. Learning rates follow base_train: base rates times the batch
// LR scale, the embeddings' also times (n_embd / 768)^-0.5.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "model/param_layout.h"

namespace nanoforge {

// base_train's defaults (its command-line flags).
struct OptimizerHyperparameters {
  double unembedding_lr = 0.008;
  double embedding_lr = 0.3;
  double scalar_lr = 0.5;
  double matrix_lr = 0.02;
  double weight_decay = 0.28;  // scaled by the training horizon (training_horizon.h) before use
};

enum class GroupKind { kAdamW, kMuon };

struct ParamGroup {
  GroupKind kind = GroupKind::kAdamW;
  std::string label;                     // "unembedding", "muon (1280, 1280)", ...
  std::vector<const ParamInfo*> params;  // stacking order (nanochat's registration order)
  double initial_lr = 0;                 // the scheduled lr is initial_lr * lr multiplier
  double weight_decay = 0;               // AdamW: constant; Muon: replaced by the schedule each step
  // AdamW
  double beta1 = 0, beta2 = 0, eps = 0;
  // Muon
  int64_t rows = 0, cols = 0;  // every matrix of the group is (rows, cols)
  double muon_beta2 = 0.9;     // NorMuon's second-moment decay
  int ns_steps = 5;            // Polar Express iterations
  // Muon's lr multiplier for the shape: sqrt(max(1, rows / cols)).
  double lr_shape_scale() const;
};

// `batch_lr_scale` and `weight_decay` come from the training horizon (bls and wd_scaled).
std::vector<ParamGroup> nanochat_param_groups(const GPTConfig& config, const ParamLayout& layout,
                                              const OptimizerHyperparameters& hyper, double batch_lr_scale,
                                              double weight_decay);

}  // namespace nanoforge
