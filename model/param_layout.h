// The parameter layout of nanochat's GPT, defined once: every parameter's state-dict name, PyTorch shape
// (Linear weights are (out, in)), offset in the one flat parameter buffer, and optimizer kind. The
// optimizer, checkpoints, the parity tool and exporters all use this table.
//
// Buffer order is backward order: lm_head first, then the layers from last to first, then the embeddings,
// so the gradients of a contiguous prefix of the buffer are complete early in the backward pass (what
// bucketed all-reduce needs). state_dict_order() gives nanochat's module registration order instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"

namespace nanoforge {

// nanochat's optimizer grouping (setup_optimizer), and its num_scaling_params() buckets.
enum class ParamKind {
  kEmbedding,       // transformer.wte.weight                   AdamW "embedding"
  kValueEmbedding,  // value_embeds.{i}.weight                  AdamW "value_embeds"
  kUnembedding,     // lm_head.weight                           AdamW "unembedding"
  kResidLambdas,    // resid_lambdas                            AdamW "resid"
  kX0Lambdas,       // x0_lambdas                               AdamW "x0"
  kSmear,           // smear_gate.weight, smear_lambda, backout_lambda: AdamW "smear"
  kMatrix,          // everything under transformer.h, ve_gate included: Muon
};

const char* param_kind_name(ParamKind kind);

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // in elements, into the flat parameter buffer
  int64_t numel = 0;
  ParamKind kind = ParamKind::kMatrix;
};

// Parameter counts by nanochat's num_scaling_params() buckets.
struct ParamCounts {
  int64_t wte = 0;
  int64_t value_embeds = 0;
  int64_t lm_head = 0;
  int64_t transformer_matrices = 0;
  int64_t scalars = 0;
  int64_t total = 0;
  // What nanochat's scaling laws use: transformer matrices plus lm_head.
  int64_t scaling() const { return transformer_matrices + lm_head; }
};

class ParamLayout {
 public:
  explicit ParamLayout(const GPTConfig& config);

  const std::vector<ParamInfo>& params() const { return params_; }  // buffer order
  int64_t total_numel() const { return total_numel_; }
  // The parameter with this state-dict name, or nullptr.
  const ParamInfo* find(const std::string& name) const;
  // Aborts naming the parameter when it does not exist (a programming error).
  const ParamInfo& at(const std::string& name) const;
  // Names in nanochat's state-dict (module registration) order.
  std::vector<std::string> state_dict_order() const;
  ParamCounts counts() const;

 private:
  void add(std::string name, std::vector<int64_t> shape, ParamKind kind);

  GPTConfig config_;
  std::vector<ParamInfo> params_;
  int64_t total_numel_ = 0;
};

// The counts as nanochat prints them ("wte : 41,943,040" ... "total : 896,533,746"), one per line.
std::string format_param_counts(const ParamCounts& counts);

// Names of per-layer parameters, e.g. layer_param(3, "attn.c_q") = "transformer.h.3.attn.c_q.weight".
std::string layer_param(int64_t layer, const char* suffix);
std::string value_embed_param(int64_t layer);

}  // namespace nanoforge
