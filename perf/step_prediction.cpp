// predict_step: replays the recorded events on two clocks (compute stream, link), sums per op name and per
// phase, and derives tokens/s and MFU as the trainer does (perf/peak_flops.h, model/flops.h). A previous
// step's events only move the clocks: the step is timed from its first own event.
#include "perf/step_prediction.h"

#include <algorithm>
#include <map>

#include "model/flops.h"
#include "perf/peak_flops.h"
#include "support/check.h"

namespace nanoforge {
namespace {

constexpr int64_t kGemmTile = 128;  // assumed cuBLASLt output tile (128x128 CTAs are typical for bf16)

struct RowTotals {
  KernelRow row;
  std::map<Bound, double> seconds_by_bound;
};

void add_to(RowTotals& totals, double seconds, Bound bound) {
  totals.row.calls += 1;
  totals.row.seconds += seconds;
  totals.seconds_by_bound[bound] += seconds;
}

Bound main_bound(const RowTotals& totals) {
  return std::max_element(totals.seconds_by_bound.begin(), totals.seconds_by_bound.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

double tensor_efficiency(CostClass kind, const GpuSpec& gpu) {
  switch (kind) {
    case CostClass::kGemm:
    case CostClass::kFp8Gemm:  // assumed: cuBLASLt reaches the same fraction of its FP8 peak
      return gpu.gemm_efficiency;
    case CostClass::kOwnGemm:
    case CostClass::kOwnFp8Gemm:  // assumed: our FP8 GEMM reaches the same fraction of its FP8 peak
      return gpu.own_gemm_efficiency;
    case CostClass::kAttentionForward:
      return gpu.attention_forward_efficiency;
    case CostClass::kAttentionBackward:
      return gpu.attention_backward_efficiency;
    case CostClass::kCudnnAttentionForward:
      return gpu.cudnn_attention_forward_efficiency;
    case CostClass::kCudnnAttentionBackward:
      return gpu.cudnn_attention_backward_efficiency;
    case CostClass::kVector:
      return gpu.gemm_efficiency;  // no tensor-core work
  }
  return gpu.gemm_efficiency;
}

}  // namespace

const char* bound_name(Bound bound) {
  switch (bound) {
    case Bound::kTensor:
      return "tensor";
    case Bound::kFp32:
      return "fp32";
    case Bound::kSfu:
      return "sfu";
    case Bound::kMemory:
      return "memory";
    case Bound::kLaunch:
      return "launch";
    case Bound::kLink:
      return "link";
  }
  return "?";
}

double gemm_wave_fill(int64_t rows, int64_t cols, int sms) {
  const int64_t tiles = ((rows + kGemmTile - 1) / kGemmTile) * ((cols + kGemmTile - 1) / kGemmTile);
  if (tiles == 0 || sms <= 0) return 1.0;
  const int64_t waves = (tiles + sms - 1) / sms;
  return static_cast<double>(tiles) / static_cast<double>(waves * sms);
}

OpTimePrediction predict_op(const OpCost& cost, const GpuSpec& gpu) {
  double fill = 1.0;
  const bool fp8 = cost.kind == CostClass::kFp8Gemm || cost.kind == CostClass::kOwnFp8Gemm;
  if (fp8 || cost.kind == CostClass::kGemm || cost.kind == CostClass::kOwnGemm) {
    fill = gemm_wave_fill(cost.gemm_rows, cost.gemm_cols, gpu.sms);  // ours uses 128 x 128 tiles too
  }
  const double peak = fp8 ? gpu.fp8_tensor_flops : gpu.tensor_flops;
  const double tensor = cost.tensor_flops / (peak * tensor_efficiency(cost.kind, gpu) * fill);
  const double fp32 = cost.vector_flops / (gpu.fp32_flops * gpu.fp32_efficiency);
  const double sfu = gpu.sfu_ops_per_s > 0 ? cost.sfu_ops / (gpu.sfu_ops_per_s * gpu.fp32_efficiency) : 0;
  const double memory = cost.bytes / (gpu.memory_bytes_per_s * gpu.memory_efficiency);
  const double launch = cost.kernels * gpu.kernel_floor_seconds;
  OpTimePrediction prediction{tensor, Bound::kTensor};
  if (fp32 > prediction.seconds) prediction = {fp32, Bound::kFp32};
  if (sfu > prediction.seconds) prediction = {sfu, Bound::kSfu};
  if (memory > prediction.seconds) prediction = {memory, Bound::kMemory};
  prediction.seconds += cost.kernels * gpu.kernel_tail_seconds;
  if (launch > prediction.seconds) prediction = {launch, Bound::kLaunch};
  if (cost.host_sync) prediction.seconds += gpu.host_sync_seconds;
  return prediction;
}

double collective_seconds(const CollectiveCall& call, const GpuSpec& gpu) {
  if (call.world_size <= 1) return 0;
  const double share = static_cast<double>(call.world_size - 1) / call.world_size;
  const double passes = call.kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
  return gpu.link_latency_seconds +
         passes * share * static_cast<double>(call.bytes) / (gpu.link_bytes_per_s * gpu.link_efficiency);
}

StepPrediction predict_step(const std::vector<StepEvent>& events, const GpuSpec& gpu, const GPTConfig& config,
                            int64_t batch, int world_size, int64_t grad_accum_steps) {
  StepPrediction prediction;
  prediction.gpu = gpu;
  std::map<std::string, RowTotals> compute_rows, link_rows;
  std::map<StepPhase, double> phase_seconds;
  std::map<int64_t, double> collective_end;  // by id
  double compute_clock = 0, link_clock = 0;
  double step_start = 0;  // the compute clock when the predicted step begins (after a previous step's events)
  bool in_previous_step = true;
  for (const StepEvent& event : events) {
    const bool counted = event.phase != StepPhase::kPreviousStep;
    if (counted && in_previous_step) {
      in_previous_step = false;
      step_start = compute_clock;
    }
    switch (event.kind) {
      case StepEvent::Kind::kOp: {
        const OpTimePrediction op = predict_op(event.cost, gpu);
        compute_clock += op.seconds;
        if (!counted) break;
        RowTotals& totals = compute_rows[event.op];
        totals.row.name = event.op;
        totals.row.tensor_flops += event.cost.tensor_flops;
        totals.row.fp32_flops += event.cost.vector_flops;
        totals.row.bytes += event.cost.bytes;
        add_to(totals, op.seconds, op.bound);
        phase_seconds[event.phase] += op.seconds;
        prediction.launches += event.cost.kernels;
        prediction.executed_tensor_flops += event.cost.tensor_flops;
        break;
      }
      case StepEvent::Kind::kCollectiveIssued: {
        const double seconds = collective_seconds(event.collective, gpu);
        const double start = std::max(compute_clock, link_clock);
        link_clock = start + seconds;
        collective_end[event.collective.id] = link_clock;
        if (!counted) break;
        RowTotals& totals = link_rows[collective_name(event.collective.kind)];
        totals.row.name = collective_name(event.collective.kind);
        totals.row.collective = true;
        totals.row.bytes += static_cast<double>(event.collective.bytes);
        add_to(totals, seconds, Bound::kLink);
        prediction.comm_seconds += seconds;
        break;
      }
      case StepEvent::Kind::kCollectiveWaited: {
        const auto end = collective_end.find(event.collective.id);
        NANOFORGE_CHECK(end != collective_end.end(), "step model: wait for collective {} never issued",
                        event.collective.id);
        if (end->second > compute_clock) {
          if (counted) prediction.exposed_comm_seconds += end->second - compute_clock;
          compute_clock = end->second;
        }
        break;
      }
    }
  }
  for (auto& [name, totals] : compute_rows) {
    totals.row.bound = main_bound(totals);
    prediction.rows.push_back(totals.row);
    prediction.compute_seconds += totals.row.seconds;
  }
  std::sort(prediction.rows.begin(), prediction.rows.end(),
            [](const KernelRow& a, const KernelRow& b) { return a.seconds > b.seconds; });
  for (auto& [name, totals] : link_rows) {
    totals.row.bound = Bound::kLink;
    prediction.rows.push_back(totals.row);
  }
  for (const auto& [phase, seconds] : phase_seconds)
    prediction.phases.push_back({phase, seconds});
  prediction.step_seconds = compute_clock - step_start;
  prediction.tokens_per_step = batch * config.sequence_len * grad_accum_steps * world_size;
  prediction.flops_per_token = flops_per_token(config);
  if (prediction.step_seconds > 0) {
    prediction.tokens_per_second = static_cast<double>(prediction.tokens_per_step) / prediction.step_seconds;
  }
  prediction.mfu_percent = mfu_percent(prediction.tokens_per_second,
                                       static_cast<double>(prediction.flops_per_token), gpu.name, world_size)
                               .value_or(0.0);
  return prediction;
}

std::vector<ComparedRow> compare_with_measured(const StepPrediction& prediction,
                                               const std::vector<ops::OpTime>& measured) {
  std::vector<ComparedRow> rows;
  std::map<std::string, size_t> index;
  for (const KernelRow& row : prediction.rows) {
    if (row.collective) continue;  // the op profiler times ops, not the communication stream
    index[row.name] = rows.size();
    rows.push_back({row.name, row.calls, 0, 1e3 * row.seconds, 0});
  }
  for (const ops::OpTime& time : measured) {
    auto [it, inserted] = index.emplace(time.op, rows.size());
    if (inserted) rows.push_back({time.op, 0, 0, 0, 0});
    rows[it->second].measured_calls = time.calls;
    rows[it->second].measured_ms = time.milliseconds;
  }
  return rows;
}

}  // namespace nanoforge
