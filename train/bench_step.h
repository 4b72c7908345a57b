// `nanoforge bench step`: the throughput of one training step's forward + backward for a randomly
// initialised model, as median tokens/s over timed steps after warm-up, and the GFLOP/s that implies by
// nanochat's FLOPs-per-token formula.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"

namespace nanoforge {

struct BenchStepOptions {
  GPTConfig config;  // sequence_len is the benchmarked sequence length
  int64_t batch = 1;
  int steps = 10;
  int warmup_steps = 2;
  uint64_t seed = 42;
};

struct BenchStepResult {
  std::vector<double> step_seconds;  // the timed steps
  double median_seconds = 0;
  double tokens_per_second = 0;
  double gflops_per_second = 0;
  int64_t flops_per_token = 0;
  int64_t param_bytes = 0;  // parameters + gradients
  int64_t activation_bytes = 0;
};

BenchStepResult bench_step(const BenchStepOptions& options);

}  // namespace nanoforge
