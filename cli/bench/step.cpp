// `nanoforge bench step --depth D --seq T --batch B [--device cpu|cuda] [--profile] ...`: prints the model,
// each timed step, the median throughput with MFU and memory, per-op times when asked (on a GPU the
// performance model's prediction beside them), and last a one-line JSON record for scripts (also written to
// --json-out). With --model-only --gpu NAME nothing runs: the performance model (perf/) predicts
// one whole training step on that GPU, kernel by kernel.
#include <absl/flags/flag.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_replace.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>

#include "cli/bench/bench_flags.h"
#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "kernels/backend_info.h"
#include "kernels/device.h"
#include "kernels/kernel_settings.h"
#include "model/fp8_linears.h"
#include "model/gpt_config.h"
#include "model/param_layout.h"
#include "perf/peak_flops.h"
#include "perf/step_report.h"
#include "step/kernel_choice.h"
#include "step/memory_plan.h"
#include "step/step_timing.h"
#include "support/status.h"
#include "support/version.h"

ABSL_FLAG(bool, profile, false,
          "run one more (untimed) step with per-op times and print them (on a GPU: beside the prediction)");
ABSL_FLAG(bool, model_only, false,
          "run nothing: predict one training step on --gpu, kernel by kernel (performance model)");
ABSL_FLAG(std::string, gpu, "", "with --model-only: the GPU to predict for, h200, h100 or gb10");
ABSL_FLAG(int32_t, world, 1, "with --model-only: data-parallel GPUs (ZeRO-1 collectives included)");
NANOFORGE_FLAG_LIMIT(world, 1, 65536);
ABSL_FLAG(int64_t, grad_accum, 1, "with --model-only: micro-batches per optimizer step");
NANOFORGE_FLAG_LIMIT(grad_accum, 1, 1 << 20);
ABSL_FLAG(
    double, peak_tflops, 0,
    "with --model-only: dense bf16 TFLOP/s to time the tensor-core work with instead of the peak table's "
    "(MFU stays against the table's, as the trainer's)");
NANOFORGE_FLAG_LIMIT(peak_tflops, 1, 1e5, "", 0.0);
ABSL_FLAG(bool, fp8, false,
          "the step in FP8 (recipe model.fp8); with --model-only printed beside the same step without it");
ABSL_FLAG(std::string, mlp_gemm, "auto",
          "on the GPU (or --gpu with --model-only): the MLP GEMMs, auto (the trainer's choice for that GPU), "
          "cublaslt or fused");

namespace nanoforge {
namespace {

// The JSON record printed last (and written to --json-out): every number above, and what produced it.
std::string bench_json(const BenchStepOptions& options, const BenchStepResult& result,
                       const std::string& device_name, const BackendInfo& backend) {
  const GPTConfig& c = options.config;
  const bool gpu = options.device == Device::kCuda;
  const std::optional<double> mfu =
      mfu_percent(result.tokens_per_second, static_cast<double>(result.flops_per_token), device_name, 1);
  std::vector<std::string> op_times;
  for (const ops::OpTime& t : result.op_times)
    op_times.push_back(
        fmt::format("{{\"op\": \"{}\", \"calls\": {}, \"ms\": {:.4f}}}", t.op, t.calls, t.milliseconds));
  return fmt::format(
      "{{\"bench\": \"step\", \"backend\": \"{}\", \"device\": \"{}\", \"dtype\": \"{}\", "
      "\"tokens_per_s\": {:.2f}, \"gflops\": {:.3f}, \"mfu_percent\": {}, \"step_ms_median\": {:.3f}, "
      "\"flops_per_token\": {}, \"n_layer\": {}, \"n_embd\": {}, \"n_head\": {}, \"n_kv_head\": {}, "
      "\"vocab_size\": {}, \"seq\": {}, \"batch\": {}, \"window_pattern\": \"{}\", \"threads\": {}, "
      "\"steps\": {}, \"warmup\": {}, \"param_bytes\": {}, \"optimizer_state_bytes\": {}, "
      "\"activation_bytes\": {}, "
      "\"peak_device_bytes\": {}, \"op_times\": [{}], \"version\": \"{}\", \"commit\": \"{}\"}}",
      gpu ? "cuda" : "cpu", device_name, gpu ? "bf16" : "f32", result.tokens_per_second,
      result.gflops_per_second, mfu ? fmt::format("{:.2f}", *mfu) : "null", 1e3 * result.median_seconds,
      result.flops_per_token, c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.vocab_size, c.sequence_len,
      options.batch, c.window_pattern, backend.cpu_threads, options.steps, options.warmup_steps,
      result.param_bytes, result.optimizer_state_bytes, result.activation_bytes, result.peak_device_bytes,
      absl::StrJoin(op_times, ", "), version(), git_commit());
}

// --model-only: the flags that make sense with it, and those that only do without it.
absl::Status check_model_flags(bool model_only) {
  if (!model_only) {
    for (const char* flag : {"gpu", "world", "grad_accum", "peak_tflops"}) {
      if (flag_given(flag)) {
        return absl::InvalidArgumentError(fmt::format(
            "--{} belongs to the performance model: add --model-only (on a GPU, bench step measures one "
            "GPU's training step and predicts it for the GPU it runs on)",
            absl::StrReplaceAll(flag, {{"_", "-"}})));
      }
    }
    return absl::OkStatus();
  }
  if (absl::GetFlag(FLAGS_device) != "cuda") {
    return absl::InvalidArgumentError(
        fmt::format("--model-only predicts the CUDA backend: use --device cuda, not --device {}",
                    absl::GetFlag(FLAGS_device)));
  }
  for (const char* flag : {"profile", "steps", "warmup", "threads"}) {
    if (flag_given(flag)) {
      return absl::InvalidArgumentError(
          fmt::format("--{} times a real step; --model-only runs nothing (drop one of them)", flag));
    }
  }
  if (absl::GetFlag(FLAGS_gpu).empty() || !gpu_spec(absl::GetFlag(FLAGS_gpu))) {
    return absl::InvalidArgumentError(fmt::format("--model-only needs --gpu {}, got '{}'",
                                                  absl::StrJoin(gpu_spec_names(), "|"),
                                                  absl::GetFlag(FLAGS_gpu)));
  }
  return absl::OkStatus();
}

// --model-only: the whole training step of one GPU among --world, predicted and printed.
// The kernels it is recorded with are --mlp-gemm's and --attention's, auto predicted for that GPU
// (step/kernel_choice.h).
absl::Status run_step_model(const GPTConfig& config, int64_t batch, const std::string& attention) {
  GpuSpec gpu = *gpu_spec(absl::GetFlag(FLAGS_gpu));
  if (absl::GetFlag(FLAGS_peak_tflops) > 0) gpu.tensor_flops = 1e12 * absl::GetFlag(FLAGS_peak_tflops);
  const ops::KernelSettings settings = predicted_kernel_settings(attention, absl::GetFlag(FLAGS_mlp_gemm),
                                                                 config, gpu.compute_capability_major);
  const StepModelSetup setup{config,
                             batch,
                             absl::GetFlag(FLAGS_world),
                             absl::GetFlag(FLAGS_grad_accum),
                             ops::mlp_gemm_name(settings.mlp_gemm),
                             ops::attention_implementation_name(settings.attention)};
  fmt::print("model: {}\n{}", config.describe(), format_param_counts(ParamLayout(config).counts()));
  fmt::print(
      "step (predicted, nothing runs): batch {} x seq {} x {} micro-batches on each of {} GPUs, bf16 "
      "activations, fp32 weights, MuonAdamW with ZeRO-1; rank 0's kernels\n",
      batch, config.sequence_len, setup.grad_accum_steps, setup.world_size);
  fmt::print("{}", format_assumptions(gpu));
  fmt::print("kernels: {} (--mlp-gemm={}, --attention={})\n", settings.describe(),
             absl::GetFlag(FLAGS_mlp_gemm), attention);
  StepRecordingOptions recording{.config = config,
                                 .batch = batch,
                                 .world_size = setup.world_size,
                                 .grad_accum_steps = setup.grad_accum_steps,
                                 .kernel_settings = settings};
  recording.kernel_settings.fp8 = absl::GetFlag(FLAGS_fp8);
  const StepPrediction prediction = predict_step(record_training_step(recording), gpu, config, batch,
                                                 setup.world_size, setup.grad_accum_steps);
  fmt::print("{}", format_prediction(prediction));
  if (recording.kernel_settings.fp8) {
    // The same step without FP8, and the two side by side. MFU stays against the dense bf16 peak (as
    // nanochat reports it), so FP8 and bf16 runs compare on one scale.
    recording.kernel_settings.fp8 = false;
    const StepPrediction bf16 = predict_step(record_training_step(recording), gpu, config, batch,
                                             setup.world_size, setup.grad_accum_steps);
    fmt::print("fp8: {}\n", Fp8Linears::of(config).summary());
    fmt::print(
        "step without fp8 {:.1f} ms, {:.0f} tok/s, MFU {:.1f} %  |  with fp8 {:.1f} ms, {:.0f} tok/s, MFU "
        "{:.1f} % (against the bf16 peak)  |  {:+.1f} % tokens/s\n",
        1e3 * bf16.step_seconds, bf16.tokens_per_second, bf16.mfu_percent, 1e3 * prediction.step_seconds,
        prediction.tokens_per_second, prediction.mfu_percent,
        100.0 * (prediction.tokens_per_second / bf16.tokens_per_second - 1.0));
    // The MLP's FP8 GEMMs the other way: our fused GEMM on FP8 codes, or cuBLASLt's FP8 GEMM with ReLU² as
    // passes of their own (--mlp-gemm picks; auto is the trainer's choice for the GPU).
    recording.kernel_settings.fp8 = true;
    recording.kernel_settings.mlp_gemm =
        settings.mlp_gemm == ops::MlpGemm::kFused ? ops::MlpGemm::kCublasLt : ops::MlpGemm::kFused;
    const StepPrediction other = predict_step(record_training_step(recording), gpu, config, batch,
                                              setup.world_size, setup.grad_accum_steps);
    fmt::print(
        "with fp8 and --mlp-gemm={} instead: {:.1f} ms, {:+.1f} % tokens/s over the step without fp8\n",
        ops::mlp_gemm_name(recording.kernel_settings.mlp_gemm), 1e3 * other.step_seconds,
        100.0 * (other.tokens_per_second / bf16.tokens_per_second - 1.0));
  }
  return print_json_record(prediction_json(setup, prediction));
}

// On a GPU with --profile: the profiled step beside the model's prediction of the same calls.
void print_predicted_beside_measured(const BenchStepOptions& options, const BenchStepResult& result,
                                     const std::string& device_name) {
  const std::optional<GpuSpec> gpu = gpu_spec_for_device(device_name);
  if (!gpu) {
    fmt::print("no performance model for {} (it knows {}): measured times only\n", device_name,
               absl::StrJoin(gpu_spec_names(), ", "));
    return;
  }
  StepRecordingOptions recording{
      .config = options.config, .batch = options.batch, .kernel_settings = options.kernel_settings};
  const StepPrediction prediction = predict_step(record_training_step(recording), *gpu, options.config,
                                                 options.batch, /*world_size=*/1, /*grad_accum_steps=*/1);
  fmt::print("predicted ({}) vs measured, per op of one training step:\n{}", gpu->name,
             format_comparison(compare_with_measured(prediction, result.op_times)));
}

absl::Status run_bench_step(const std::vector<std::string>& /*arguments*/) {
  const bool model_only = absl::GetFlag(FLAGS_model_only);
  NANOFORGE_RETURN_IF_ERROR(check_model_flags(model_only));
  if (!validate_mlp_gemm_setting(absl::GetFlag(FLAGS_mlp_gemm)).ok()) {
    return absl::InvalidArgumentError(
        fmt::format("--mlp-gemm must be auto, cublaslt or fused, got '{}'", absl::GetFlag(FLAGS_mlp_gemm)));
  }
  const std::string attention =
      absl::GetFlag(FLAGS_attention).empty() ? "auto" : absl::GetFlag(FLAGS_attention);
  if (std::find(std::begin(kAttentionSettings), std::end(kAttentionSettings), attention) ==
      std::end(kAttentionSettings)) {
    return absl::InvalidArgumentError(
        fmt::format("--attention must be auto, flash or cudnn, got '{}'", attention));
  }
  BenchStepOptions options;
  if (!model_only) {
    NANOFORGE_ASSIGN_OR_RETURN(options.device, device_from_flag());
  }
  if (absl::GetFlag(FLAGS_depth) * absl::GetFlag(FLAGS_aspect_ratio) > kMaxEmbd) {
    return absl::InvalidArgumentError(
        fmt::format("--depth x --aspect-ratio = {} (the model's width) exceeds the "
                    "limit of {}",
                    absl::GetFlag(FLAGS_depth) * absl::GetFlag(FLAGS_aspect_ratio), kMaxEmbd));
  }
  NANOFORGE_ASSIGN_OR_RETURN(options.config, model_from_flags(absl::GetFlag(FLAGS_vocab)));
  options.batch = absl::GetFlag(FLAGS_batch);
  options.steps = absl::GetFlag(FLAGS_steps);
  options.warmup_steps = absl::GetFlag(FLAGS_warmup);
  options.profile = absl::GetFlag(FLAGS_profile);
  if (model_only) return run_step_model(options.config, options.batch, attention);
  NANOFORGE_ASSIGN_OR_RETURN(const std::string device_name, device_display_name(options.device));
  NANOFORGE_RETURN_IF_ERROR(check_model_fits(options.config, options.device, options.batch,
                                             options.config.sequence_len, absl::GetFlag(FLAGS_fp8),
                                             "--batch"));
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  const BackendInfo backend = backend_info();

  fmt::print("model: {}\n{}", options.config.describe(),
             format_param_counts(ParamLayout(options.config).counts()));
  NANOFORGE_ASSIGN_OR_RETURN(const std::string fp8, choose_fp8(absl::GetFlag(FLAGS_fp8), "tensorwise",
                                                               options.device, options.config));
  options.kernel_settings.fp8 = absl::GetFlag(FLAGS_fp8);
  fmt::print("{}\n", fp8);
  if (options.device == Device::kCuda) {
    NANOFORGE_ASSIGN_OR_RETURN(const ChosenMlpGemm mlp_gemm, choose_mlp_gemm(absl::GetFlag(FLAGS_mlp_gemm),
                                                                             options.device, options.config));
    NANOFORGE_ASSIGN_OR_RETURN(
        const ChosenAttention chosen_attention,
        choose_attention(attention, options.device, options.config, options.batch, /*deterministic=*/false));
    options.kernel_settings.mlp_gemm = mlp_gemm.gemm;
    options.kernel_settings.attention = chosen_attention.implementation;
    fmt::print(
        "step: batch {} x seq {} = {} tokens on {} (bf16 activations, fp32 weights and gradients)\n"
        "kernels: {} ({}; {})\n",
        options.batch, options.config.sequence_len, options.batch * options.config.sequence_len, device_name,
        options.kernel_settings.describe(), chosen_attention.line, mlp_gemm.line);
  } else {
    fmt::print("step: batch {} x seq {} = {} tokens, {} threads, BLAS {}\n", options.batch,
               options.config.sequence_len, options.batch * options.config.sequence_len, backend.cpu_threads,
               backend.blas);
  }
  const BenchStepResult result = bench_step(options);
  for (size_t i = 0; i < result.step_seconds.size(); ++i) {
    fmt::print("step {:>3}: {:9.2f} ms\n", i, 1e3 * result.step_seconds[i]);
  }
  const std::optional<double> mfu =
      mfu_percent(result.tokens_per_second, static_cast<double>(result.flops_per_token), device_name, 1);
  fmt::print(
      "training step: median {:.2f} ms, {:.0f} tokens/s, {:.2f} GFLOP/s ({} FLOPs/token), MFU {}, loss "
      "{:.4f}, "
      "memory {:.1f} MB parameters+gradients, {:.1f} MB optimizer state, {:.1f} MB activations, {:.1f} MB "
      "peak "
      "on the device\n",
      1e3 * result.median_seconds, result.tokens_per_second, result.gflops_per_second, result.flops_per_token,
      mfu ? fmt::format("{:.1f}%", *mfu) : "n/a", result.last_loss, result.param_bytes / 1e6,
      result.optimizer_state_bytes / 1e6, result.activation_bytes / 1e6, result.peak_device_bytes / 1e6);
  if (!result.op_times.empty()) {
    double total = 0;
    for (const ops::OpTime& t : result.op_times)
      total += t.milliseconds;
    fmt::print("per-op times of one step (sum {:.2f} ms):\n", total);
    for (const ops::OpTime& t : result.op_times)
      fmt::print("  {:<32} {:>6} calls {:>10.3f} ms {:>6.1f}%\n", t.op, t.calls, t.milliseconds,
                 total > 0 ? 100 * t.milliseconds / total : 0.0);
    if (options.device == Device::kCuda) print_predicted_beside_measured(options, result, device_name);
  }
  const std::string json = bench_json(options, result, device_name, backend);
  return print_json_record(json);
}

}  // namespace

Command bench_step_command() {
  return {
      "bench step", "time the training step of a random model: tokens/s and GFLOP/s (last line: JSON)",
      "--depth D --seq T --batch B [--vocab V] [--steps N] [--window-pattern P] [--threads N] "
      "[--device cpu|cuda] [--mlp-gemm auto|cublaslt|fused] [--attention auto|flash|cudnn] [--profile] "
      "[--json-out FILE]\n"
      "       --device cuda --model-only --gpu h200|h100|gb10 --depth D --seq T --batch B [--world N] "
      "[--grad-accum N] [--peak-tflops T] [--mlp-gemm auto|cublaslt|fused] [--attention auto|flash|cudnn] "
      "[--fp8]",
      flag_list({kStepSizeFlags,
                 {"vocab"},
                 kTimingFlags,
                 kModelShapeFlags,
                 {"device", "threads", "profile", "model_only", "gpu", "world", "grad_accum", "peak_tflops",
                  "mlp_gemm", "attention", "fp8", "json_out"}}),
      run_bench_step};
}

}  // namespace nanoforge
