// How much memory one rank of a training run takes, planned before anything is allocated — every buffer a
// run holds is sized by a measuring pass over the same code that later carves it (ArenaAllocator) — and the
// check that it fits in what the machine has free, so that a run that cannot fit stops at start-up, saying
// what to change, rather than running out of memory at its first step or first checkpoint.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "model/gpt_config.h"
#include "optim/param_groups.h"

namespace nanoforge {

// The activation dtype a run trains in on `device`: f32 on the CPU, bf16 on the GPU (mixed precision).
DType training_dtype(Device device);

struct MemoryPlan {
  Device device = Device::kCpu;
  DType dtype = DType::kF32;  // activations
  int64_t batch = 0, seq = 0;
  // Device memory, bytes.
  int64_t params = 0;             // master weights (f32)
  int64_t grads = 0;              // gradients (f32)
  int64_t compute_weights = 0;    // bf16 copies of the GEMM matrices (GPU only)
  int64_t activations = 0;        // the (batch, seq) plan, attention workspace included, and rotary tables
  int64_t optimizer_state = 0;    // this rank's share (ZeRO-1)
  int64_t gradient_buckets = 0;   // reduce-scatter / all-gather staging
  int64_t muon_scratch = 0;       // the orthogonalisation's matrices
  int64_t checkpoint_gather = 0;  // allocated at the first checkpoint
  int64_t runtime_reserve = 0;    // what the plan cannot see (GPU: cuBLASLt workspace, kernel scratch, NCCL)
  // Host memory rank 0 holds for a checkpoint: the weights and the whole optimizer state, gathered. It
  // competes with the run where the device's memory is the host's (the CPU, or a GPU sharing it).
  int64_t checkpoint_snapshot = 0;

  int64_t device_total() const;
  // The table printed at start-up, one line per item, GB.
  std::string table() const;
};

// The plan of rank `rank` of `world_size` training `config` with `groups` (nanochat_param_groups) on
// `device`, batches of (batch, seq), gradient buckets of `bucket_bytes`, in FP8 (model.fp8) or not.
// Allocates nothing.
MemoryPlan plan_training_memory(const GPTConfig& config, const std::vector<ParamGroup>& groups, Device device,
                                int64_t batch, int64_t seq, int rank, int world_size, int64_t bucket_bytes,
                                bool fp8);

struct AvailableMemory {
  int64_t bytes = 0;
  bool shared_with_host = false;  // CPU runs and GPUs integrated with the host (GB10)
  std::string source;             // where the figure comes from, for messages
};

// What is free for a run on `device` now: MemAvailable of /proc/meminfo for the CPU and for GPUs that share
// the host's memory (cudaMemGetInfo misses the page cache the kernel would give back there), cudaMemGetInfo's
// free bytes for other GPUs. Measure it before allocating the model.
absl::StatusOr<AvailableMemory> available_memory(Device device);

// OK when the plan fits in `available`; otherwise ResourceExhausted with what is needed, what is available,
// and the largest train.device_batch_size that would fit.
absl::Status check_memory_plan(const MemoryPlan& plan, const AvailableMemory& available);

// What a GPT of `config` with activations planned for (batch, seq) allocates on `device` — `nanoforge eval`,
// `sample` and `bench step` — checked before it is created against what the device has free; the error
// names `batch_setting` (the flag that sets the batch) and the largest batch that fits. `fp8`: the model
// will train in FP8 and plan its scratch.
absl::Status check_model_fits(const GPTConfig& config, Device device, int64_t batch, int64_t seq, bool fp8,
                              const std::string& batch_setting);

}  // namespace nanoforge
