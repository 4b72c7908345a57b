// plan_training_memory sums the measuring passes of the model (GPT::memory_bytes, activation_bytes) and of
// the optimizer (DataParallelOptimizer::memory_bytes); available_memory asks the kernel or the CUDA driver.
#include "step/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "kernels/device.h"
#include "model/activations.h"
#include "model/gpt.h"
#include "model/param_layout.h"
#include "optim/data_parallel_optimizer.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// Device memory a GPU run uses beyond its planned buffers: cuBLASLt's workspace (tens of MB), the kernels'
// grow-only reduction scratch (kernels/cuda/scratch.h, a few MB), NCCL's channel buffers allocated at the
// first collectives (~100-300 MB with its defaults) and cudaMalloc's 2 MB granularity over a dozen buffers.
// A margin, not a measurement: 512 MiB covers these with room to spare.
constexpr int64_t kGpuRuntimeReserveBytes = int64_t{512} << 20;

double gigabytes(int64_t bytes) {
  return static_cast<double>(bytes) / 1e9;
}

// The host bytes of rank 0's checkpoint snapshot: every weight and every optimizer-state tensor in f32 (the
// file format), plus the host copy of one gathered bucket (at most the checkpoint gather's size).
int64_t checkpoint_snapshot_bytes(const ParamLayout& layout, const std::vector<ParamGroup>& groups,
                                  int64_t checkpoint_gather_bytes) {
  int64_t elements = layout.total_numel();
  for (const ParamGroup& group : groups) {
    for (const ParamInfo* info : group.params) {
      if (group.kind == GroupKind::kAdamW) {
        elements += 2 * info->numel;  // exp_avg, exp_avg_sq
      } else {
        elements += info->numel + std::max(group.rows, group.cols);  // momentum, second moment
      }
    }
  }
  return elements * dtype_bytes(DType::kF32) + checkpoint_gather_bytes;
}

// MemAvailable of /proc/meminfo in bytes, or an error saying why not.
absl::StatusOr<int64_t> host_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  if (!meminfo) return absl::UnavailableError("cannot read /proc/meminfo to learn the free host memory");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    int64_t value = 0;
    if (!(fields >> key >> value >> unit) || key != "MemAvailable:") continue;
    if (unit != "kB") {
      return absl::UnavailableError(
          fmt::format("/proc/meminfo: MemAvailable in unit '{}', expected kB", unit));
    }
    return value * 1024;
  }
  return absl::UnavailableError("/proc/meminfo has no MemAvailable line (Linux 3.14 or later has one)");
}

}  // namespace

DType training_dtype(Device device) {
  return device == Device::kCuda ? DType::kBF16 : DType::kF32;
}

int64_t MemoryPlan::device_total() const {
  return params + grads + compute_weights + activations + optimizer_state + gradient_buckets + muon_scratch +
         checkpoint_gather + runtime_reserve;
}

std::string MemoryPlan::table() const {
  const std::pair<std::string, int64_t> rows[] = {
      {"parameters (f32)", params},
      {"gradients (f32)", grads},
      {"bf16 weight matrices", compute_weights},
      {fmt::format("activations ({})", dtype_name(dtype)), activations},
      {"optimizer state", optimizer_state},
      {"gradient buckets", gradient_buckets},
      {"Muon scratch", muon_scratch},
      {"checkpoint gather", checkpoint_gather},
      {"runtime reserve", runtime_reserve},
  };
  std::string text = fmt::format("memory per rank on {} (batch {} x {}):\n", device_name(device), batch, seq);
  for (const auto& [name, bytes] : rows) {
    if (bytes > 0) text += fmt::format("  {:<24}{:>10.3f} GB\n", name, gigabytes(bytes));
  }
  text += fmt::format("  {:<24}{:>10.3f} GB\n", "total", gigabytes(device_total()));
  if (checkpoint_snapshot > 0) {
    text += fmt::format("  {:<24}{:>10.3f} GB (host memory, rank 0)\n", "checkpoint snapshot",
                        gigabytes(checkpoint_snapshot));
  }
  return text;
}

MemoryPlan plan_training_memory(const GPTConfig& config, const std::vector<ParamGroup>& groups, Device device,
                                int64_t batch, int64_t seq, int rank, int world_size, int64_t bucket_bytes,
                                bool fp8) {
  MemoryPlan plan;
  plan.device = device;
  plan.dtype = training_dtype(device);
  plan.batch = batch;
  plan.seq = seq;
  const GPT::MemoryBytes model = GPT::memory_bytes(config, device, plan.dtype);
  plan.params = model.params;
  plan.grads = model.grads;
  plan.compute_weights = model.compute_weights;
  plan.activations = activation_bytes(config, device, plan.dtype, batch, seq, fp8) + model.rotary_tables;
  const DType param_dtype = device == Device::kCuda ? DType::kF32 : plan.dtype;
  const DataParallelOptimizer::MemoryBytes optimizer =
      DataParallelOptimizer::memory_bytes(groups, device, param_dtype, rank, world_size, bucket_bytes);
  plan.optimizer_state = optimizer.state;
  plan.gradient_buckets = optimizer.staging;
  plan.muon_scratch = optimizer.muon_scratch;
  plan.checkpoint_gather = optimizer.checkpoint_gather;
  plan.runtime_reserve = device == Device::kCuda ? kGpuRuntimeReserveBytes : 0;
  if (rank == 0) {
    plan.checkpoint_snapshot =
        checkpoint_snapshot_bytes(ParamLayout(config), groups, optimizer.checkpoint_gather);
  }
  return plan;
}

absl::StatusOr<AvailableMemory> available_memory(Device device) {
  AvailableMemory available;
  if (device == Device::kCuda) {
    GpuMemoryInfo info;
    std::string reason;
    if (!gpu_memory_info(&info, &reason)) {
      return absl::FailedPreconditionError(fmt::format("no usable GPU: {}", reason));
    }
    if (!info.integrated) {
      available.bytes = info.free_bytes;
      available.source = fmt::format("{} (cudaMemGetInfo: {:.2f} GB free of {:.2f} GB)", info.name,
                                     gigabytes(info.free_bytes), gigabytes(info.total_bytes));
      return available;
    }
    available.source =
        fmt::format("{}, which shares the host's memory (MemAvailable in /proc/meminfo)", info.name);
  } else {
    available.source = "the host (MemAvailable in /proc/meminfo)";
  }
  absl::StatusOr<int64_t> host = host_memory_available();
  if (!host.ok()) return host.status();
  available.bytes = *host;
  available.shared_with_host = true;
  return available;
}

absl::Status check_memory_plan(const MemoryPlan& plan, const AvailableMemory& available) {
  const int64_t snapshot = available.shared_with_host ? plan.checkpoint_snapshot : 0;
  const int64_t needed = plan.device_total() + snapshot;
  if (needed <= available.bytes) return absl::OkStatus();
  // Activations grow with the batch; everything else stays. Per sequence rounds the fixed parts (rotary
  // tables, attention workspace) in with them, so the batch suggested errs on the small side.
  const int64_t fixed = needed - plan.activations;
  const int64_t per_sequence = std::max<int64_t>(plan.activations / std::max<int64_t>(plan.batch, 1), 1);
  const int64_t fitting_batch =
      std::min(available.bytes > fixed ? (available.bytes - fixed) / per_sequence : 0, plan.batch - 1);
  std::string advice;
  if (fitting_batch >= 1) {
    advice = fmt::format(
        "lower train.device_batch_size to {} or less (the total batch size must stay a multiple of "
        "device_batch_size x max_seq_len x ranks; gradient accumulation makes up the rest)",
        fitting_batch);
  } else {
    advice = fmt::format(
        "even one sequence per rank does not fit ({:.2f} GB without activations): use a smaller model, a "
        "shorter model.max_seq_len, or more ranks (the optimizer state is sharded across them)",
        gigabytes(fixed));
  }
  return absl::ResourceExhaustedError(
      fmt::format("the run needs {:.2f} GB per rank{} but {} has {:.2f} GB available; {}\n{}",
                  gigabytes(needed), snapshot > 0 ? " (checkpoint snapshot included)" : "", available.source,
                  gigabytes(available.bytes), advice, plan.table()));
}

absl::Status check_model_fits(const GPTConfig& config, Device device, int64_t batch, int64_t seq, bool fp8,
                              const std::string& batch_setting) {
  // Activations grow with batch x seq x vocab: beyond 2^31 tokens at once the sizes would not even be
  // computable (and no machine holds them).
  constexpr int64_t kMaxTokensAtOnce = int64_t{1} << 31;
  if (batch > kMaxTokensAtOnce / std::max<int64_t>(seq, 1)) {
    return absl::InvalidArgumentError(
        fmt::format("{} {}: {} rows of {} tokens exceed the {} tokens a forward "
                    "pass may hold",
                    batch_setting, batch, batch, seq, kMaxTokensAtOnce));
  }
  const DType dtype = training_dtype(device);
  const GPT::MemoryBytes model = GPT::memory_bytes(config, device, dtype);
  const int64_t fixed = model.params + model.grads + model.compute_weights + model.rotary_tables +
                        (device == Device::kCuda ? kGpuRuntimeReserveBytes : 0);
  const int64_t per_row = activation_bytes(config, device, dtype, 1, seq, fp8);
  const int64_t needed = fixed + activation_bytes(config, device, dtype, batch, seq, fp8);
  NANOFORGE_ASSIGN_OR_RETURN(const AvailableMemory available, available_memory(device));
  if (needed <= available.bytes) return absl::OkStatus();
  const int64_t fitting =
      available.bytes > fixed ? (available.bytes - fixed) / std::max<int64_t>(per_row, 1) : 0;
  return absl::ResourceExhaustedError(fmt::format(
      "{} {}: the model ({:.2f} GB) with activations for {} x {} tokens needs {:.2f} GB, but {} has {:.2f} "
      "GB "
      "available; {}",
      batch_setting, batch, gigabytes(fixed), batch, seq, gigabytes(needed), available.source,
      gigabytes(available.bytes),
      fitting >= 1 ? fmt::format("give {} {} or less", batch_setting, std::min(fitting, batch - 1))
                   : std::string("even one row does not fit")));
}

}  // namespace nanoforge
