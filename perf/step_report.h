// The performance model's printed forms: the per-kernel table with its totals and assumptions, the one-line
// JSON record `bench step --model-only` ends with, and the predicted-vs-measured table of a profiled GPU
// step.
#pragma once

#include <string>
#include <vector>

#include "perf/step_prediction.h"

namespace nanoforge {

struct StepModelSetup {
  GPTConfig config;
  int64_t batch = 1;
  int world_size = 1;
  int64_t grad_accum_steps = 1;
  std::string mlp_gemm = "cublaslt";  // the MLP GEMM the recorded step used (kernels/mlp_gemm.h)
  std::string attention = "flash";    // its attention (kernels/attention_implementation.h)
};

std::string format_assumptions(const GpuSpec& gpu);
std::string format_prediction(const StepPrediction& prediction);
std::string prediction_json(const StepModelSetup& setup, const StepPrediction& prediction);
std::string format_comparison(const std::vector<ComparedRow>& rows);

}  // namespace nanoforge
