// `nanoforge bench step --depth D --seq T --batch B [--vocab V] [--steps N] ...`: prints the model, each
// timed step, the median throughput, and last a one-line JSON record for scripts.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include "kernels/backend_info.h"
#include "model/param_layout.h"
#include "support/version.h"
#include "train/bench_step.h"
#include "train/command.h"
#include "train/common_flags.h"

ABSL_FLAG(int64_t, depth, 4, "model depth; dimensions derived as nanochat's base_train does");
ABSL_FLAG(int64_t, seq, 256, "sequence length T (the model's sequence_len)");
ABSL_FLAG(int64_t, batch, 8, "rows per step B");
ABSL_FLAG(int64_t, vocab, 32768, "vocabulary size");
ABSL_FLAG(int32_t, steps, 10, "timed steps (the median is reported)");
ABSL_FLAG(int32_t, warmup, 2, "untimed steps first");
ABSL_FLAG(std::string, window_pattern, "SSSL",
          "attention windows per layer, S(hort) / L(ong), tiled; last layer L");
ABSL_FLAG(int64_t, aspect_ratio, 64, "model dim = depth * aspect_ratio, rounded up to the head dim");
ABSL_FLAG(int64_t, head_dim, 128, "attention head dimension");
ABSL_FLAG(std::string, device, "cpu", "backend to run on (cpu; cuda arrives with the CUDA backend)");

namespace nanoforge {
namespace {

absl::Status run_bench_step(const std::vector<std::string>& /*arguments*/) {
  if (absl::GetFlag(FLAGS_device) != "cpu") {
    return absl::UnimplementedError(
        fmt::format("--device {}: bench step runs the model on the CPU backend only so far (the CUDA backend "
                    "is not complete)",
                    absl::GetFlag(FLAGS_device)));
  }
  BenchStepOptions options;
  options.config = GPTConfig::from_depth(absl::GetFlag(FLAGS_depth), absl::GetFlag(FLAGS_vocab),
                                         absl::GetFlag(FLAGS_seq), absl::GetFlag(FLAGS_window_pattern),
                                         absl::GetFlag(FLAGS_aspect_ratio), absl::GetFlag(FLAGS_head_dim));
  options.batch = absl::GetFlag(FLAGS_batch);
  options.steps = absl::GetFlag(FLAGS_steps);
  options.warmup_steps = absl::GetFlag(FLAGS_warmup);
  if (absl::GetFlag(FLAGS_depth) < 1 || absl::GetFlag(FLAGS_head_dim) < 2) {
    return absl::InvalidArgumentError("--depth must be >= 1 and --head-dim >= 2");
  }
  if (absl::Status valid = options.config.validate(); !valid.ok()) {
    return absl::InvalidArgumentError(fmt::format("model from the flags: {}", std::string(valid.message())));
  }
  if (options.batch < 1 || options.steps < 1 || options.warmup_steps < 0) {
    return absl::InvalidArgumentError("--batch and --steps must be >= 1, --warmup >= 0");
  }
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  const BackendInfo backend = backend_info();

  fmt::print("model: {}\n{}", options.config.describe(),
             format_param_counts(ParamLayout(options.config).counts()));
  fmt::print("step: batch {} x seq {} = {} tokens, {} threads, BLAS {}\n", options.batch,
             options.config.sequence_len, options.batch * options.config.sequence_len, backend.cpu_threads,
             backend.blas);
  const BenchStepResult result = bench_step(options);
  for (size_t i = 0; i < result.step_seconds.size(); ++i) {
    fmt::print("step {:>3}: {:9.2f} ms\n", i, 1e3 * result.step_seconds[i]);
  }
  fmt::print(
      "forward+backward: median {:.2f} ms, {:.0f} tokens/s, {:.2f} GFLOP/s ({} FLOPs/token), memory "
      "{:.1f} MB parameters+gradients, {:.1f} MB activations\n",
      1e3 * result.median_seconds, result.tokens_per_second, result.gflops_per_second, result.flops_per_token,
      result.param_bytes / 1e6, result.activation_bytes / 1e6);
  const GPTConfig& c = options.config;
  fmt::print(
      "{{\"bench\": \"step\", \"backend\": \"cpu\", \"dtype\": \"f32\", \"tokens_per_s\": {:.2f}, "
      "\"gflops\": "
      "{:.3f}, \"step_ms_median\": {:.3f}, \"flops_per_token\": {}, \"depth\": {}, \"n_layer\": {}, "
      "\"n_embd\": {}, "
      "\"n_head\": {}, \"n_kv_head\": {}, \"vocab_size\": {}, \"seq\": {}, \"batch\": {}, "
      "\"window_pattern\": "
      "\"{}\", \"threads\": {}, \"steps\": {}, \"warmup\": {}, \"param_bytes\": {}, \"activation_bytes\": "
      "{}, "
      "\"version\": \"{}\", \"commit\": \"{}\"}}\n",
      result.tokens_per_second, result.gflops_per_second, 1e3 * result.median_seconds, result.flops_per_token,
      absl::GetFlag(FLAGS_depth), c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.vocab_size, c.sequence_len,
      options.batch, c.window_pattern, backend.cpu_threads, options.steps, options.warmup_steps,
      result.param_bytes, result.activation_bytes, version(), git_commit());
  return absl::OkStatus();
}

}  // namespace

Command bench_step_command() {
  return {"bench step",
          "time forward+backward of a random model: tokens/s and GFLOP/s (last line: JSON)",
          "--depth D --seq T --batch B [--vocab V] [--steps N] [--window-pattern P] [--threads N]",
          {"depth", "seq", "batch", "vocab", "steps", "warmup", "window_pattern", "aspect_ratio", "head_dim",
           "device", "threads"},
          run_bench_step};
}

}  // namespace nanoforge
