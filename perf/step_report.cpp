// Text and JSON for a StepPrediction; numbers are printed in the units their names give (ms, GB, GFLOP).
#include "perf/step_report.h"

#include <fmt/format.h>

#include "support/json_text.h"

namespace nanoforge {

std::string format_assumptions(const GpuSpec& gpu) {
  return fmt::format(
      "gpu: {} — {:.0f} TFLOP/s dense bf16, {:.1f} TFLOP/s fp32, {:.0f} GB/s memory, {:.0f} GB/s link each "
      "way, "
      "{} SMs\n"
      "assumed efficiencies: GEMM {:.0f}% (x wave fill of 128x128 tiles; our fused MLP GEMM {:.0f}%), "
      "attention forward {:.0f}% / backward {:.0f}% (cuDNN's {:.0f}% / {:.0f}%), fp32 {:.0f}%, "
      "memory {:.0f}%, link {:.0f}% + {:.0f} us a collective; at least {:.0f} us a kernel, {:.0f} us a host "
      "read-back\n",
      gpu.description, gpu.tensor_flops / 1e12, gpu.fp32_flops / 1e12, gpu.memory_bytes_per_s / 1e9,
      gpu.link_bytes_per_s / 1e9, gpu.sms, 100 * gpu.gemm_efficiency, 100 * gpu.own_gemm_efficiency,
      100 * gpu.attention_forward_efficiency, 100 * gpu.attention_backward_efficiency,
      100 * gpu.cudnn_attention_forward_efficiency, 100 * gpu.cudnn_attention_backward_efficiency,
      100 * gpu.fp32_efficiency, 100 * gpu.memory_efficiency, 100 * gpu.link_efficiency,
      1e6 * gpu.link_latency_seconds, 1e6 * gpu.kernel_floor_seconds, 1e6 * gpu.host_sync_seconds);
}

std::string format_prediction(const StepPrediction& p) {
  std::string out = fmt::format("{:<32} {:>6} {:>11} {:>10} {:>9} {:>10} {:>7} {:>6}\n", "kernel", "calls",
                                "GFLOP (TC)", "GFLOP fp32", "GB", "pred. ms", "bound", "share");
  for (const KernelRow& row : p.rows) {
    const std::string share =
        row.collective
            ? std::string("link")
            : fmt::format("{:.1f}%", p.step_seconds > 0 ? 100 * row.seconds / p.step_seconds : 0.0);
    out += fmt::format("{:<32} {:>6} {:>11.1f} {:>10.1f} {:>9.3f} {:>10.3f} {:>7} {:>6}\n", row.name,
                       row.calls, row.tensor_flops / 1e9, row.fp32_flops / 1e9, row.bytes / 1e9,
                       1e3 * row.seconds, bound_name(row.bound), share);
  }
  std::string phases;
  for (const PhaseTime& phase : p.phases)
    phases += fmt::format("{}{} {:.2f} ms", phases.empty() ? "" : ", ", step_phase_name(phase.phase),
                          1e3 * phase.seconds);
  out += fmt::format("phases (compute stream): {}\n", phases);
  out += fmt::format(
      "step: {:.2f} ms = {:.2f} ms of {} kernels + {:.2f} ms waiting for collectives ({:.2f} ms on the link "
      "in "
      "all)\n",
      1e3 * p.step_seconds, 1e3 * p.compute_seconds, p.launches, 1e3 * p.exposed_comm_seconds,
      1e3 * p.comm_seconds);
  out += fmt::format(
      "predicted: {:.0f} tokens/s over {} tokens a step, MFU {:.1f}% ({} FLOPs/token, nanochat's count; the "
      "kernels execute {:.1f} TFLOP a step on the tensor cores of one GPU)\n",
      p.tokens_per_second, p.tokens_per_step, p.mfu_percent, p.flops_per_token,
      p.executed_tensor_flops / 1e12);
  return out;
}

std::string prediction_json(const StepModelSetup& setup, const StepPrediction& p) {
  const GPTConfig& c = setup.config;
  std::string kernels;
  for (const KernelRow& row : p.rows) {
    kernels += fmt::format(
        "{}{{\"name\": {}, \"collective\": {}, \"calls\": {}, \"gflop\": {:.3f}, \"fp32_gflop\": {:.3f}, "
        "\"gb\": {:.4f}, \"ms\": {:.4f}, \"bound\": \"{}\"}}",
        kernels.empty() ? "" : ", ", json_string(row.name), row.collective, row.calls, row.tensor_flops / 1e9,
        row.fp32_flops / 1e9, row.bytes / 1e9, 1e3 * row.seconds, bound_name(row.bound));
  }
  return fmt::format(
      "{{\"bench\": \"step\", \"model_only\": true, \"gpu\": {}, \"n_layer\": {}, \"n_embd\": {}, "
      "\"n_head\": "
      "{}, \"vocab_size\": {}, \"seq\": {}, \"batch\": {}, \"world_size\": {}, \"grad_accum_steps\": {}, "
      "\"mlp_gemm\": {}, \"attention\": {}, \"step_ms\": {:.3f}, \"compute_ms\": {:.3f}, "
      "\"exposed_comm_ms\": {:.3f}, "
      "\"comm_ms\": {:.3f}, \"launches\": {}, \"tokens_per_step\": {}, \"tokens_per_s\": {:.1f}, "
      "\"tokens_per_s_per_gpu\": {:.1f}, \"mfu_percent\": {:.2f}, \"flops_per_token\": {}, \"kernels\": "
      "[{}]}}",
      json_string(p.gpu.name), c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.sequence_len, setup.batch,
      setup.world_size, setup.grad_accum_steps, json_string(setup.mlp_gemm), json_string(setup.attention),
      1e3 * p.step_seconds, 1e3 * p.compute_seconds, 1e3 * p.exposed_comm_seconds, 1e3 * p.comm_seconds,
      p.launches, p.tokens_per_step, p.tokens_per_second, p.tokens_per_second / setup.world_size,
      p.mfu_percent, p.flops_per_token, kernels);
}

std::string format_comparison(const std::vector<ComparedRow>& rows) {
  std::string out = fmt::format("{:<32} {:>11} {:>11} {:>10} {:>10} {:>9}\n", "op", "pred. calls",
                                "meas. calls", "pred. ms", "meas. ms", "meas/pred");
  double predicted = 0, measured = 0;
  for (const ComparedRow& row : rows) {
    const std::string ratio = row.predicted_ms > 0 && row.measured_calls > 0
                                  ? fmt::format("{:.2f}", row.measured_ms / row.predicted_ms)
                                  : std::string("-");
    out += fmt::format("{:<32} {:>11} {:>11} {:>10.3f} {:>10.3f} {:>9}\n", row.name, row.predicted_calls,
                       row.measured_calls, row.predicted_ms, row.measured_ms, ratio);
    predicted += row.predicted_ms;
    measured += row.measured_ms;
  }
  out += fmt::format("{:<32} {:>11} {:>11} {:>10.3f} {:>10.3f} {:>9}\n", "total", "", "", predicted, measured,
                     predicted > 0 ? fmt::format("{:.2f}", measured / predicted) : std::string("-"));
  return out;
}

}  // namespace nanoforge
