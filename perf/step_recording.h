// The performance model's input: one training step of nanoforge's real code — TrainingStep::run
// (step/training_step.h), the step the trainer and `bench step` run: GPT's forward and backward, the
// DataParallelOptimizer's step and its all-gathers of the bf16 weights, which the next forward waits for
// layer by layer — run while its thread records (kernels/op_recorder.h, priced by perf/op_cost.h), so every
// op call is recorded with its shapes and cost instead of running, and every collective through a
// RecordingCommunicator. Nothing is allocated: a d20 step on 8 GPUs is recorded on a laptop. When kernels
// are fused or ops added, the recording follows the code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "perf/op_cost.h"
#include "perf/recording_communicator.h"

namespace nanoforge {

// kPreviousStep: the step recorded before the predicted one (with the optimizer), whose all-gathers the
// predicted step's forward waits for; the prediction runs its events on the clocks but counts none of them.
enum class StepPhase { kPreviousStep, kForward, kBackward, kOptimizer, kStepEnd };
const char* step_phase_name(StepPhase phase);

struct StepEvent {
  enum class Kind { kOp, kCollectiveIssued, kCollectiveWaited } kind = Kind::kOp;
  StepPhase phase = StepPhase::kForward;
  std::string op;             // kOp: the op profiler's name ("matmul", "attention_backward", ...)
  OpCost cost;                // kOp
  CollectiveCall collective;  // kCollectiveIssued; kCollectiveWaited: only collective.id
};

struct StepRecordingOptions {
  GPTConfig config;    // sequence_len is the step's sequence length
  int64_t batch = 1;   // rows per GPU per micro-batch
  int world_size = 1;  // data-parallel GPUs; the recording is rank 0's (it owns a matrix in every Muon stack)
  int64_t grad_accum_steps = 1;
  int64_t bucket_bytes = 25 << 20;  // recipe dist.bucket_mb's default
  Device device = Device::kCuda;    // the CPU records the same calls (its f32 dtypes), for name checks
  // The kernels the model runs (which attention and MLP GEMM are priced; FP8 or not).
  ops::KernelSettings kernel_settings = {};
};

std::vector<StepEvent> record_training_step(const StepRecordingOptions& options);

}  // namespace nanoforge
