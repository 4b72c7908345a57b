// bench_step: builds the model and its optimizer on the chosen backend as the trainer does (one rank),
// feeds random token rows (fixed seed) and times TrainingStep::run, the trainer's step, with the weight
// gathers finished. On the GPU each step ends with a device synchronisation, so the wall time covers the
// kernels, not only their launches.
#include "step/step_timing.h"

#include <algorithm>
#include <chrono>

#include "dist/single_communicator.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"
#include "model/flops.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"
#include "step/training_step.h"
#include "support/check.h"
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

// The recipe's dist.bucket_mb default (25 MB, PyTorch DDP's).
constexpr int64_t kBucketBytes = int64_t{25} << 20;

}  // namespace

BenchStepResult bench_step(const BenchStepOptions& options) {
  const GPTConfig& config = options.config;
  const Device device = options.device;
  GPT model(config, device, device == Device::kCuda ? DType::kBF16 : DType::kF32);
  model.set_kernel_settings(options.kernel_settings);
  model.init_weights(options.seed);
  model.refresh_compute_weights();
  const int64_t tokens = options.batch * config.sequence_len;
  model.plan(options.batch, config.sequence_len);
  const StepTokens step_tokens = random_tokens(config, options.batch, options.seed, device);
  // The trainer's optimizer on one rank: nanochat's parameter groups at the default hyperparameters.
  SingleCommunicator communicator(device);
  DataParallelOptimizer optimizer(
      nanochat_param_groups(config, model.layout(), OptimizerHyperparameters{}, 1.0, 0.0), model.layout(),
      model.params(), model.grads(), communicator, kBucketBytes,
      {model.compute_copy(), model.compute_layout().copy_offset});
  TrainingStep step(model, optimizer, 1);
  StepRequest request;
  request.next_micro_batch = [&](int64_t) -> absl::StatusOr<MicroBatch> {
    return MicroBatch{step_tokens.ids, step_tokens.targets};
  };

  BenchStepResult result;
  auto run_step = [&] {
    const absl::StatusOr<StepResult> stepped = step.run(request);
    NANOFORGE_CHECK(stepped.ok(), "bench step: {}", stepped.status().ToString());
    synchronize(device);
    result.last_loss = stepped->loss;
  };
  for (int step_index = 0; step_index < options.warmup_steps + options.steps; ++step_index) {
    const auto start = std::chrono::steady_clock::now();
    run_step();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (step_index >= options.warmup_steps) result.step_seconds.push_back(elapsed.count());
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
  result.optimizer_state_bytes = optimizer.state_bytes();
  result.activation_bytes = model.activation_bytes();
  result.peak_device_bytes = device_bytes_peak(device);
  return result;
}

}  // namespace nanoforge
