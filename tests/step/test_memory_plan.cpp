// The memory plan: on the CPU it is exactly what a run then allocates (model, activations, optimizer and the
// first checkpoint's gather scratch, counted by DeviceBuffer); on the GPU (measured here without one) the
// master weights and optimizer state stay fp32 and Muon's scratch is bf16; ranks share the optimizer state;
// and the check passes a plan that fits, refuses one that does not with what to change.
#include <gtest/gtest.h>

#include <vector>

#include "dist/single_communicator.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/device_buffer.h"
#include "model/fp8_linears.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/named_tensor.h"
#include "optim/param_groups.h"
#include "step/memory_plan.h"

namespace nanoforge {
namespace {

constexpr int64_t kBatch = 3, kSeq = 96;
constexpr int64_t kBucketBytes = 64 << 10;  // several buckets for this small model

GPTConfig small_model() {
  return GPTConfig::from_sizing(
      {.depth = 2, .aspect_ratio = 64, .head_dim = 64, .max_seq_len = 128, .window_pattern = "SL"}, 300);
}

std::vector<ParamGroup> groups_of(const GPTConfig& config, const ParamLayout& layout) {
  return nanochat_param_groups(config, layout, OptimizerHyperparameters{}, 1.0, 0.0);
}

TEST(MemoryPlan, IsWhatACpuRunAllocates) {
  const GPTConfig config = small_model();
  const int64_t before = device_bytes_in_use(Device::kCpu);
  GPT model(config, Device::kCpu, DType::kF32);
  model.plan(kBatch, kSeq);
  SingleCommunicator communicator(Device::kCpu);
  DataParallelOptimizer optimizer(groups_of(config, model.layout()), model.layout(), model.params(),
                                  model.grads(), communicator, kBucketBytes);
  std::vector<NamedTensor> state;
  ASSERT_TRUE(optimizer.gather_state(state).ok());  // allocates the gather scratch
  const int64_t allocated = device_bytes_in_use(Device::kCpu) - before;

  const MemoryPlan plan = plan_training_memory(config, groups_of(config, model.layout()), Device::kCpu,
                                               kBatch, kSeq, 0, 1, kBucketBytes, /*fp8=*/false);
  EXPECT_EQ(plan.params, model.params().bytes());
  EXPECT_EQ(plan.grads, model.grads().bytes());
  EXPECT_EQ(plan.compute_weights, 0);
  EXPECT_EQ(plan.activations,
            model.activation_bytes() + GPT::memory_bytes(config, Device::kCpu, DType::kF32).rotary_tables);
  EXPECT_EQ(plan.optimizer_state, optimizer.state_bytes());
  EXPECT_EQ(plan.runtime_reserve, 0);
  EXPECT_EQ(plan.device_total(), allocated);
  EXPECT_GT(plan.checkpoint_snapshot,
            2 * plan.params);  // the weights, and a state tensor per parameter at least
  EXPECT_NE(plan.table().find("total"), std::string::npos);
}

// A run in FP8 plans the scratch of the FP8 GEMMs with its activations, as the model then takes it.
TEST(MemoryPlan, Fp8RunPlansTheScratchTheModelTakes) {
  const GPTConfig config = small_model();
  ASSERT_GT(Fp8Linears::of(config).converted, 0);
  GPT model(config, Device::kCpu, DType::kF32);
  ops::KernelSettings settings;
  settings.fp8 = true;
  model.set_kernel_settings(settings);
  model.plan(kBatch, kSeq);
  const std::vector<ParamGroup> groups = groups_of(config, model.layout());
  const MemoryPlan fp8 =
      plan_training_memory(config, groups, Device::kCpu, kBatch, kSeq, 0, 1, kBucketBytes, true);
  const MemoryPlan plain =
      plan_training_memory(config, groups, Device::kCpu, kBatch, kSeq, 0, 1, kBucketBytes, false);
  EXPECT_EQ(fp8.activations,
            model.activation_bytes() + GPT::memory_bytes(config, Device::kCpu, DType::kF32).rotary_tables);
  EXPECT_GT(fp8.activations, plain.activations);
}

TEST(MemoryPlan, GpuKeepsFp32MasterAndStateWithBf16MuonScratch) {
  // The optimizer's and the model's parts are measured only, so this needs no GPU.
  const GPTConfig config = small_model();
  const ParamLayout layout(config);
  const std::vector<ParamGroup> groups = groups_of(config, layout);
  const auto cpu = DataParallelOptimizer::memory_bytes(groups, Device::kCpu, DType::kF32, 0, 1, kBucketBytes);
  const auto gpu =
      DataParallelOptimizer::memory_bytes(groups, Device::kCuda, DType::kF32, 0, 1, kBucketBytes);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.staging, cpu.staging);
  EXPECT_EQ(gpu.checkpoint_gather, cpu.checkpoint_gather);
  // Four matrices of bf16 instead of f32, each rounded up to the arena's 256-byte alignment.
  EXPECT_LE(gpu.muon_scratch, cpu.muon_scratch / 2 + 4 * ArenaAllocator::kAlignmentBytes);
  EXPECT_GE(gpu.muon_scratch, cpu.muon_scratch / 2 - 4 * ArenaAllocator::kAlignmentBytes);
  const GPT::MemoryBytes model = GPT::memory_bytes(config, Device::kCuda, DType::kBF16);
  EXPECT_EQ(model.params, layout.total_numel() * 4);
  EXPECT_GT(model.compute_weights, 0);
}

TEST(MemoryPlan, GpuPlanHalvesTheActivationsAndAddsTheBf16Matrices) {
#ifdef NANOFORGE_HAVE_CUDA
  const GPTConfig config = small_model();
  const ParamLayout layout(config);
  const std::vector<ParamGroup> groups = groups_of(config, layout);
  const MemoryPlan cpu =
      plan_training_memory(config, groups, Device::kCpu, kBatch, kSeq, 0, 1, kBucketBytes, false);
  const MemoryPlan gpu =
      plan_training_memory(config, groups, Device::kCuda, kBatch, kSeq, 0, 1, kBucketBytes, false);
  EXPECT_EQ(gpu.dtype, DType::kBF16);
  EXPECT_EQ(gpu.params, cpu.params);
  EXPECT_EQ(gpu.optimizer_state, cpu.optimizer_state);
  EXPECT_EQ(gpu.compute_weights, GPT::memory_bytes(config, Device::kCuda, DType::kBF16).compute_weights);
  // bf16 activations with f32 statistics: a little over half the CPU's f32 plan (whose attention workspace
  // differs too, so only the range is checked).
  EXPECT_LT(gpu.activations, cpu.activations * 3 / 4);
  EXPECT_GT(gpu.activations, cpu.activations / 3);
  EXPECT_GT(gpu.runtime_reserve, 0);
  EXPECT_EQ(gpu.device_total() - cpu.device_total(), gpu.compute_weights + gpu.activations - cpu.activations +
                                                         gpu.muon_scratch - cpu.muon_scratch +
                                                         gpu.runtime_reserve);
#else
  GTEST_SKIP() << "built without the CUDA backend: no GPU attention workspace to measure";
#endif
}

TEST(MemoryPlan, RanksShareTheOptimizerState) {
  const GPTConfig config = small_model();
  const ParamLayout layout(config);
  const std::vector<ParamGroup> groups = groups_of(config, layout);
  const int64_t alone =
      DataParallelOptimizer::memory_bytes(groups, Device::kCpu, DType::kF32, 0, 1, kBucketBytes).state;
  const int64_t first =
      DataParallelOptimizer::memory_bytes(groups, Device::kCpu, DType::kF32, 0, 2, kBucketBytes).state;
  const int64_t second =
      DataParallelOptimizer::memory_bytes(groups, Device::kCpu, DType::kF32, 1, 2, kBucketBytes).state;
  EXPECT_LT(first, alone);
  EXPECT_LT(second, alone);
  // Together the two ranks hold it all, give or take each state tensor's alignment.
  EXPECT_GE(first + second, alone);
}

// A plan of 10 GB on the device: 2 GB of weights and gradients, 8 GB of activations for 8 sequences.
MemoryPlan ten_gigabyte_plan() {
  MemoryPlan plan;
  plan.batch = 8;
  plan.seq = 2048;
  plan.params = 1'000'000'000;
  plan.grads = 1'000'000'000;
  plan.activations = 8'000'000'000;
  plan.checkpoint_snapshot = 1'000'000'000;
  return plan;
}

TEST(MemoryPlan, CheckPassesWhatFits) {
  EXPECT_TRUE(check_memory_plan(ten_gigabyte_plan(), {10'000'000'000, false, "a GPU"}).ok());
  // Where the device's memory is the host's, the checkpoint snapshot counts too.
  const absl::Status shared = check_memory_plan(ten_gigabyte_plan(), {10'500'000'000, true, "a GB10"});
  EXPECT_EQ(shared.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(shared.message().find("checkpoint snapshot included"), std::string::npos) << shared;
}

TEST(MemoryPlan, CheckSaysHowMuchAndWhatToChange) {
  // 6 GB free: 2 GB are fixed, so 4 sequences of 1 GB fit.
  const absl::Status tight = check_memory_plan(ten_gigabyte_plan(), {6'000'000'000, false, "a GPU"});
  EXPECT_EQ(tight.code(), absl::StatusCode::kResourceExhausted);
  const std::string message(tight.message());
  EXPECT_NE(message.find("needs 10.00 GB per rank"), std::string::npos) << message;
  EXPECT_NE(message.find("a GPU has 6.00 GB available"), std::string::npos) << message;
  EXPECT_NE(message.find("lower train.device_batch_size to 4 or less"), std::string::npos) << message;
  EXPECT_NE(message.find("activations (f32)"), std::string::npos) << message;  // the table
  // 1.5 GB free: not even the weights fit.
  const absl::Status hopeless = check_memory_plan(ten_gigabyte_plan(), {1'500'000'000, false, "a GPU"});
  EXPECT_NE(hopeless.message().find("even one sequence per rank does not fit"), std::string::npos)
      << hopeless;
}

TEST(MemoryPlan, AvailableMemoryComesFromTheHostOrTheDriver) {
  const absl::StatusOr<AvailableMemory> host = available_memory(Device::kCpu);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_GT(host->bytes, 0);
  EXPECT_TRUE(host->shared_with_host);
  const absl::StatusOr<AvailableMemory> gpu = available_memory(Device::kCuda);
  if (cuda::available()) {
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_GT(gpu->bytes, 0);
  } else {
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace nanoforge
