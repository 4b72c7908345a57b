// bench_step: builds the model on the CPU backend, feeds random token rows (fixed seed) and times
// zero_grad + forward + backward per step.
#include "train/bench_step.h"

#include <algorithm>
#include <chrono>

#include "model/flops.h"
#include "model/gpt.h"
#include "support/philox.h"

namespace nanoforge {

BenchStepResult bench_step(const BenchStepOptions& options) {
  const GPTConfig& config = options.config;
  GPT model(config, Device::kCpu, DType::kF32);
  model.init_weights(options.seed);
  const int64_t seq = config.sequence_len, tokens = options.batch * seq;
  model.plan(options.batch, seq);

  const Philox rng(options.seed, Philox::stream_of("bench step tokens"));
  std::vector<int32_t> ids(static_cast<size_t>(tokens)), targets(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) {
    ids[i] = static_cast<int32_t>(rng.uniform(2 * i) * static_cast<double>(config.vocab_size));
    targets[i] = static_cast<int32_t>(rng.uniform(2 * i + 1) * static_cast<double>(config.vocab_size));
  }
  const TensorView ids_view(ids.data(), {options.batch, seq}, DType::kI32, Device::kCpu);
  const TensorView targets_view(targets.data(), {options.batch, seq}, DType::kI32, Device::kCpu);

  BenchStepResult result;
  for (int step = 0; step < options.warmup_steps + options.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    model.zero_grad();
    model.forward(ids_view, targets_view);
    model.backward();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (step >= options.warmup_steps) result.step_seconds.push_back(elapsed.count());
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
  result.param_bytes = model.params().bytes() + model.grads().bytes();
  result.activation_bytes = model.activation_bytes();
  return result;
}

}  // namespace nanoforge
