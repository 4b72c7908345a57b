// The roofline prediction of one recorded training step on one GPU spec: each op call takes the largest of
// its tensor, fp32, SFU and memory times, plus kernels x the kernel tail (at least kernels x the kernel
// floor; + a host round trip for read-backs); calls run one after another on the compute stream, collectives
// on a communication stream from their issue, and a wait stalls the compute stream until its collective is
// done. Events of the previous step (StepPhase::kPreviousStep) run on both clocks but count in no row: the
// step is timed from its own first event. Rows carry the op profiler's names, as `bench step --profile`'s.
// The formula and its constants: docs/kernels.md, "Performance model".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/op_profile.h"
#include "model/gpt_config.h"
#include "perf/gpu_specs.h"
#include "perf/step_recording.h"

namespace nanoforge {

enum class Bound { kTensor, kFp32, kSfu, kMemory, kLaunch, kLink };
const char* bound_name(Bound bound);  // "tensor", "fp32", "sfu", "memory", "launch", "link"

// The time of one op call on `gpu`, and what bounds it.
struct OpTimePrediction {
  double seconds = 0;
  Bound bound = Bound::kMemory;
};
OpTimePrediction predict_op(const OpCost& cost, const GpuSpec& gpu);
// How full the last wave of a GEMM's 128x128 output tiles leaves the GPU's SMs (1 = every SM busy).
double gemm_wave_fill(int64_t rows, int64_t cols, int sms);
// A collective's time on the link: latency + the bytes each rank moves over its bus bandwidth (ring
// algorithms: (N-1)/N of the buffer for a reduce-scatter or all-gather, twice that for an all-reduce).
double collective_seconds(const CollectiveCall& call, const GpuSpec& gpu);

struct KernelRow {
  std::string name;  // op profiler name, or a collective's ("reduce_scatter", "all_gather", "all_reduce")
  bool collective = false;
  int64_t calls = 0;
  double tensor_flops = 0, fp32_flops = 0, bytes = 0;
  double seconds = 0;            // compute stream time; collectives: time on the link
  Bound bound = Bound::kMemory;  // the bound holding most of the row's time
};

struct PhaseTime {
  StepPhase phase;
  double seconds = 0;  // compute stream time (stalls on collectives included in exposed_comm_seconds)
};

struct StepPrediction {
  GpuSpec gpu;
  std::vector<KernelRow> rows;  // compute rows longest first, then the collectives
  std::vector<PhaseTime> phases;
  int64_t launches = 0;             // kernels on the compute stream
  double compute_seconds = 0;       // sum of the op calls
  double comm_seconds = 0;          // sum of the collectives on the link
  double exposed_comm_seconds = 0;  // compute stream stalled waiting for collectives
  double step_seconds = 0;
  int64_t tokens_per_step = 0;  // all GPUs
  double tokens_per_second = 0;
  double mfu_percent = 0;  // the trainer's definition: tokens/s x flops_per_token / (peak x GPUs)
  int64_t flops_per_token = 0;
  double executed_tensor_flops = 0;  // what the kernels execute on the tensor cores, one GPU
};

StepPrediction predict_step(const std::vector<StepEvent>& events, const GpuSpec& gpu, const GPTConfig& config,
                            int64_t batch, int world_size, int64_t grad_accum_steps);

// Predicted and measured side by side, by op name (rows only one side has are kept, with 0 on the other).
struct ComparedRow {
  std::string name;
  int64_t predicted_calls = 0, measured_calls = 0;
  double predicted_ms = 0, measured_ms = 0;
};
std::vector<ComparedRow> compare_with_measured(const StepPrediction& prediction,
                                               const std::vector<ops::OpTime>& measured);

}  // namespace nanoforge
