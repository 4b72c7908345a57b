// nanochat's weight initialisation (GPT.init_weights): the same distributions, scales and per-layer lambda
// ramps, drawn from a counter-based generator seeded by (seed, parameter name). The values are not
// PyTorch's random stream (that differs between its CPU and CUDA generators anyway); the distributions are.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"
#include "model/gpt_config.h"
#include "model/param_layout.h"

namespace nanoforge {

// How one parameter is initialised.
struct InitRule {
  enum class Kind { kNormal, kUniform, kConstant, kLambdaRamp } kind = Kind::kConstant;
  double a = 0;  // normal: std; uniform: low; constant: value; ramp: value at layer 0
  double b = 0;  // uniform: high; ramp: value at the last layer
};

InitRule init_rule(const GPTConfig& config, const ParamInfo& param);

// Fills the flat parameter buffer `params` (layout order, any device, f32 or f64).
void init_parameters(const GPTConfig& config, const ParamLayout& layout, uint64_t seed, TensorView params);

}  // namespace nanoforge
