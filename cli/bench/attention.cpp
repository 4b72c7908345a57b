// `nanoforge bench attention --device cuda [--attention both|cudnn|flash] --depth D --seq T --batch B`:
// one layer's attention of the model `bench step` would build (nanochat's sizing of --depth), forward and
// backward, for each window the layers use, on our flash kernels and on cuDNN's fused attention, side by
// side: mean ms per pass and the TFLOP/s the causal, windowed FLOPs imply. Inputs are random bf16; the two
// implementations see the same ones. Last line: JSON.
#include <absl/flags/flag.h>
#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli/bench/bench_flags.h"
#include "cli/command.h"
#include "cli/common_flags.h"
#include "kernels/attention_implementation.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"
#include "kernels/host_transfer.h"
#include "kernels/ops.h"
#include "model/activations.h"
#include "model/gpt_config.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// The multiply-adds of one forward: S = Q K^T and O = P V over the keys each query sees, 2 FLOPs each.
// The backward's five GEMM-sized products (S again, dP, dV, dQ, dK) are 2.5 times that.
double forward_flops(const GPTConfig& c, int64_t batch, int64_t window) {
  double keys = 0;
  for (int64_t t = 0; t < c.sequence_len; ++t)
    keys += static_cast<double>(std::min(t, window) + 1);
  return 4.0 * static_cast<double>(batch * c.n_head * c.head_dim()) * keys;
}

// The tensors of one layer's attention, random bf16, laid out as the model's: q, k, v are head slices of one
// (B, T, 2 Hkv + H, D) tensor (the fused projection's output) and d_q, d_k, d_v of its gradient.
struct LayerTensors {
  LayerTensors(const GPTConfig& c, int64_t batch) {
    const int64_t B = batch, T = c.sequence_len, H = c.n_head, Hkv = c.n_kv_head, D = c.head_dim();
    std::mt19937 rng(7);
    const auto make = [&](DeviceBuffer& buffer, std::initializer_list<int64_t> shape, DType dtype) {
      TensorView view(nullptr, shape, dtype, Device::kCuda);
      buffer = DeviceBuffer(Device::kCuda, view.bytes());
      view.data = buffer.data();
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> values(static_cast<size_t>(view.numel()));
      for (float& value : values)
        value = normal(rng);
      upload<float>(view, values.data());
      return view;
    };
    vkq = make(vkq_buffer, {B, T, 2 * Hkv + H, D}, DType::kBF16);
    d_vkq = make(d_vkq_buffer, {B, T, 2 * Hkv + H, D}, DType::kBF16);
    d_out = make(d_out_buffer, {B, T, H, D}, DType::kBF16);
    out = make(out_buffer, {B, T, H, D}, DType::kBF16);
    lse = make(lse_buffer, {B, H, T}, DType::kF32);
  }
  DeviceBuffer vkq_buffer, d_vkq_buffer, d_out_buffer, out_buffer, lse_buffer;
  TensorView vkq, d_vkq, d_out, out, lse;
};

// Mean seconds of `run` over `steps` calls after `warmup` untimed ones, the device drained around them.
template <class Run>
double mean_seconds(int warmup, int steps, Run&& run) {
  for (int i = 0; i < warmup; ++i)
    run();
  synchronize(Device::kCuda);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i)
    run();
  synchronize(Device::kCuda);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
}

struct Timing {
  std::string implementation;
  int64_t window;
  double forward_ms, backward_ms, forward_tflops, backward_tflops;
};

absl::Status run_bench_attention(const std::vector<std::string>& /*arguments*/) {
  NANOFORGE_ASSIGN_OR_RETURN(const Device device, device_from_flag());
  if (device != Device::kCuda)
    return absl::InvalidArgumentError("bench attention times GPU kernels: --device cuda");
  const std::string which = absl::GetFlag(FLAGS_attention).empty() ? "both" : absl::GetFlag(FLAGS_attention);
  if (which != "both" && which != "cudnn" && which != "flash") {
    return absl::InvalidArgumentError(
        fmt::format("--attention must be both, cudnn or flash, got '{}'", which));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const std::string device_name, device_display_name(device));
  // The vocabulary does not change the attention: bench step's default.
  NANOFORGE_ASSIGN_OR_RETURN(const GPTConfig c, model_from_flags(32768));
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int steps = std::max(1, absl::GetFlag(FLAGS_steps));
  const int warmup = std::max(1, absl::GetFlag(FLAGS_warmup));  // the first call builds cuDNN's graphs
  std::set<int64_t> windows;
  for (int64_t layer = 0; layer < c.n_layer; ++layer)
    windows.insert(std::min(c.window(layer), c.sequence_len));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim()));

  std::vector<ops::AttentionImplementation> implementations;
  if (which != "cudnn") implementations.push_back(ops::AttentionImplementation::kFlash);
  if (which != "flash") {
    ops::AttentionCalls calls{batch,        c.sequence_len,
                              c.n_head,     c.n_kv_head,
                              c.head_dim(), std::vector<int64_t>(windows.begin(), windows.end()),
                              scale,        2 * c.n_kv_head + c.n_head};
    const absl::Status supported = ops::check_cudnn_attention(calls, nullptr);
    if (supported.ok()) {
      implementations.push_back(ops::AttentionImplementation::kCudnn);
    } else if (which == "cudnn") {
      return absl::FailedPreconditionError(
          fmt::format("--attention cudnn: {}", std::string(supported.message())));
    } else {
      fmt::print("cudnn: not timed ({})\n", std::string(supported.message()));
    }
  }

  fmt::print("attention of one layer of {}: batch {}, seq {}, {} heads ({} kv), head dim {}, on {}\n",
             c.describe(), batch, c.sequence_len, c.n_head, c.n_kv_head, c.head_dim(), device_name);
  LayerTensors t(c, batch);
  const VkqSlices x = vkq_slices(t.vkq, c.n_kv_head), d = vkq_slices(t.d_vkq, c.n_kv_head);
  std::vector<Timing> timings;
  for (const int64_t window : windows) {
    const int64_t workspace_bytes = ops::attention_workspace_bytes(
        Device::kCuda, DType::kBF16, batch, c.sequence_len, c.n_head, c.n_kv_head, c.head_dim(), window);
    DeviceBuffer workspace_buffer(Device::kCuda, std::max<int64_t>(workspace_bytes, 2));
    const TensorView workspace(workspace_buffer.data(), {std::max<int64_t>(workspace_bytes, 2) / 2},
                               DType::kBF16, Device::kCuda);
    const double flops = forward_flops(c, batch, window);
    for (const ops::AttentionImplementation implementation : implementations) {
      ops::KernelSettings settings;
      settings.attention = implementation;
      const double forward = mean_seconds(warmup, steps, [&] {
        ops::attention_forward(t.out, t.lse, x.q, x.k, x.v, window, scale, workspace, settings);
      });
      const double backward = mean_seconds(warmup, steps, [&] {
        ops::attention_backward(d.q, d.k, d.v, t.d_out, x.q, x.k, x.v, t.out, t.lse, window, scale, workspace,
                                settings);
      });
      timings.push_back({ops::attention_implementation_name(implementation), window, 1e3 * forward,
                         1e3 * backward, flops / forward / 1e12, 2.5 * flops / backward / 1e12});
      const Timing& r = timings.back();
      fmt::print(
          "{:>5} window {:>5}: forward {:8.3f} ms ({:6.1f} TFLOP/s), backward {:8.3f} ms ({:6.1f} "
          "TFLOP/s)\n",
          r.implementation, r.window, r.forward_ms, r.forward_tflops, r.backward_ms, r.backward_tflops);
    }
  }
  std::vector<std::string> records;
  for (const Timing& r : timings) {
    records.push_back(fmt::format(
        "{{\"implementation\": \"{}\", \"window\": {}, \"forward_ms\": {:.4f}, \"backward_ms\": {:.4f}, "
        "\"forward_tflops\": {:.2f}, \"backward_tflops\": {:.2f}}}",
        r.implementation, r.window, r.forward_ms, r.backward_ms, r.forward_tflops, r.backward_tflops));
  }
  return print_json_record(fmt::format(
      "{{\"bench\": \"attention\", \"device\": \"{}\", \"batch\": {}, \"seq\": {}, \"heads\": {}, "
      "\"kv_heads\": {}, \"head_dim\": {}, \"steps\": {}, \"results\": [{}]}}",
      device_name, batch, c.sequence_len, c.n_head, c.n_kv_head, c.head_dim(), steps,
      absl::StrJoin(records, ", ")));
}

}  // namespace

Command bench_attention_command() {
  return {"bench attention",
          "time one layer's attention, forward and backward: our flash kernels and cuDNN's, side by side",
          "--device cuda [--attention both|cudnn|flash] [--depth D] [--seq T] [--batch B] [--head-dim D]\n"
          "  [--aspect-ratio R] [--window-pattern P] [--steps N] [--warmup N] [--json-out FILE]",
          flag_list({{"device", "attention"}, kStepSizeFlags, kModelShapeFlags, kTimingFlags, {"json_out"}}),
          run_bench_attention};
}

}  // namespace nanoforge
