// `nanoforge bench step`: the throughput of the trainer's training step (step/training_step.h: forward,
// backward, MuonAdamW's update; one rank) for a randomly initialised model, as median tokens/s over timed
// steps after warm-up, and the GFLOP/s that implies by nanochat's FLOPs-per-token formula. On the CPU
// backend in fp32, on the CUDA backend in mixed precision (bf16 activations, fp32 master weights, gradients
// and optimizer state); optionally one more step with per-op times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel_settings.h"
#include "kernels/op_profile.h"
#include "kernels/tensor.h"
#include "model/gpt_config.h"

namespace nanoforge {

struct BenchStepOptions {
  GPTConfig config;  // sequence_len is the benchmarked sequence length
  Device device = Device::kCpu;
  int64_t batch = 1;
  int steps = 10;
  int warmup_steps = 2;
  bool profile = false;  // one extra, untimed step with per-op timing
  uint64_t seed = 42;
  ops::KernelSettings kernel_settings;  // the kernels the model runs on the GPU
};

struct BenchStepResult {
  std::vector<double> step_seconds;  // the timed steps
  double last_loss = 0;              // the last step's loss (random tokens: about ln(vocab))
  double median_seconds = 0;
  double tokens_per_second = 0;
  double gflops_per_second = 0;
  int64_t flops_per_token = 0;
  int64_t param_bytes = 0;  // parameters + gradients (+ the bf16 GEMM copy on the GPU)
  int64_t optimizer_state_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t peak_device_bytes = 0;      // everything allocated on the device at once, at most
  std::vector<ops::OpTime> op_times;  // the profiled step, longest first (empty without --profile)
};

BenchStepResult bench_step(const BenchStepOptions& options);

}  // namespace nanoforge
