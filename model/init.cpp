// init_rule: nanochat's init table (see docs/model.md); init_parameters draws each parameter on the host in
// parallel (element e of a parameter depends only on the seed, its name and e) and uploads it.
#include "model/init.h"

#include <cmath>
#include <vector>

#include "kernels/host_transfer.h"
#include "support/philox.h"

namespace nanoforge {
InitRule init_rule(const GPTConfig& config, const ParamInfo& param) {
  using Kind = InitRule::Kind;
  // nanochat: s = sqrt(3) / sqrt(n_embd), so that U(-s, s) has std 1/sqrt(n_embd).
  const double s = std::sqrt(3.0) / std::sqrt(static_cast<double>(config.n_embd));
  const std::string& name = param.name;
  if (name == "transformer.wte.weight") return {Kind::kNormal, 0.8, 0};  // the docstring's 1.0 is stale
  if (name == "lm_head.weight") return {Kind::kNormal, 0.001, 0};
  if (name == "resid_lambdas") return {Kind::kLambdaRamp, 1.15, 1.05};
  if (name == "x0_lambdas") return {Kind::kLambdaRamp, 0.20, 0.05};
  if (name == "smear_gate.weight") return {Kind::kUniform, 0.0, 0.02};
  if (name == "smear_lambda") return {Kind::kConstant, 0.0, 0};
  if (name == "backout_lambda") return {Kind::kConstant, 0.2, 0};
  if (param.kind == ParamKind::kValueEmbedding) return {Kind::kUniform, -s, s};
  if (name.ends_with("attn.ve_gate.weight")) return {Kind::kUniform, 0.0, 0.02};
  if (name.ends_with("attn.c_proj.weight") || name.ends_with("mlp.c_proj.weight"))
    return {Kind::kConstant, 0, 0};
  if (name.ends_with("mlp.c_fc.weight")) return {Kind::kUniform, -0.4 * s, 0.4 * s};
  if (name.ends_with("attn.c_q.weight") || name.ends_with("attn.c_k.weight") ||
      name.ends_with("attn.c_v.weight")) {
    return {Kind::kUniform, -s, s};
  }
  NANOFORGE_CHECK(false, "no init rule for parameter {}", name);
  return {};
}

void init_parameters(const GPTConfig& config, const ParamLayout& layout, uint64_t seed, TensorView params) {
  NANOFORGE_CHECK(params.numel() == layout.total_numel(), "init_parameters: buffer {} holds not {} elements",
                  params.describe(), layout.total_numel());
  for (const ParamInfo& param : layout.params()) {
    const InitRule rule = init_rule(config, param);
    const Philox rng(seed, Philox::stream_of(param.name));
    std::vector<double> values(static_cast<size_t>(param.numel));
    const int64_t n = param.numel;
    // nanochat's ramps: value(i) = first + (last - first) * i / max(L - 1, 1).
    const double ramp_denominator = static_cast<double>(std::max<int64_t>(config.n_layer - 1, 1));
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < n; ++e) {
      switch (rule.kind) {
        case InitRule::Kind::kNormal:
          values[e] = rule.a * rng.normal(e);
          break;
        case InitRule::Kind::kUniform:
          values[e] = rule.a + (rule.b - rule.a) * rng.uniform(e);
          break;
        case InitRule::Kind::kConstant:
          values[e] = rule.a;
          break;
        case InitRule::Kind::kLambdaRamp:
          values[e] = rule.a + (rule.b - rule.a) * static_cast<double>(e) / ramp_denominator;
          break;
      }
    }
    TensorView view = params.rows(param.offset, param.numel);
    upload(view, values.data());
  }
}

}  // namespace nanoforge
