// bench_step: builds the model on the chosen backend, feeds random token rows (fixed seed) and times
// zero_grad + forward + backward per step. On the GPU each step ends with a device synchronisation, so the
// wall time covers the kernels, not only their launches.
#include "cli/bench/step_timing.h"

#include <algorithm>
#include <chrono>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/device_buffer.h"
#include "model/flops.h"
#include "model/gpt.h"
#include "support/philox.h"

namespace nanoforge {
namespace {

// The token rows of one step on `device`.
struct StepTokens {
  DeviceBuffer buffer;
  TensorView ids, targets;
};

StepTokens random_tokens(const GPTConfig& config, int64_t batch, uint64_t seed, Device device) {
  const int64_t tokens = batch * config.sequence_len;
  const Philox rng(seed, Philox::stream_of("bench step tokens"));
  std::vector<int32_t> host(static_cast<size_t>(2 * tokens));
  for (int64_t i = 0; i < tokens; ++i) {
    host[i] = static_cast<int32_t>(rng.uniform(2 * i) * static_cast<double>(config.vocab_size));
    host[tokens + i] = static_cast<int32_t>(rng.uniform(2 * i + 1) * static_cast<double>(config.vocab_size));
  }
  StepTokens step{DeviceBuffer(device, 2 * tokens * static_cast<int64_t>(sizeof(int32_t))), {}, {}};
  int32_t* base = static_cast<int32_t*>(step.buffer.data());
  step.ids = TensorView(base, {batch, config.sequence_len}, DType::kI32, device);
  step.targets = TensorView(base + tokens, {batch, config.sequence_len}, DType::kI32, device);
  copy_from_host(step.ids, host.data());
  copy_from_host(step.targets, host.data() + tokens);
  return step;
}

void wait_for_device(Device device) {
  if (device == Device::kCuda) cuda::synchronize();
}

}  // namespace

BenchStepResult bench_step(const BenchStepOptions& options) {
  const GPTConfig& config = options.config;
  const Device device = options.device;
  GPT model(config, device, device == Device::kCuda ? DType::kBF16 : DType::kF32);
  model.init_weights(options.seed);
  if (device == Device::kCuda) model.refresh_compute_weights();
  const int64_t tokens = options.batch * config.sequence_len;
  model.plan(options.batch, config.sequence_len);
  const StepTokens step_tokens = random_tokens(config, options.batch, options.seed, device);

  auto run_step = [&] {
    model.zero_grad();
    model.forward_for_backward(step_tokens.ids, step_tokens.targets);
    model.backward();
    wait_for_device(device);
  };
  BenchStepResult result;
  for (int step = 0; step < options.warmup_steps + options.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    run_step();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (step >= options.warmup_steps) result.step_seconds.push_back(elapsed.count());
  }
  if (options.profile) {
    ops::reset_op_profile();
    ops::set_op_profiling(true);
    run_step();
    ops::set_op_profiling(false);
    result.op_times = ops::op_profile();
  }
  std::vector<double> sorted = result.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty()) {
    const size_t middle = sorted.size() / 2;
    result.median_seconds = sorted.size() % 2 ? sorted[middle] : 0.5 * (sorted[middle - 1] + sorted[middle]);
    result.tokens_per_second = static_cast<double>(tokens) / result.median_seconds;
  }
  result.flops_per_token = flops_per_token(config);
  result.gflops_per_second = result.tokens_per_second * static_cast<double>(result.flops_per_token) / 1e9;
  result.param_bytes = model.params().bytes() + model.grads().bytes() + model.compute_weight_bytes();
  result.activation_bytes = model.activation_bytes();
  result.peak_device_bytes = device_bytes_peak(device);
  return result;
}

}  // namespace nanoforge
