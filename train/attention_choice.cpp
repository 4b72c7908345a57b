// model.attention resolved against the build, the GPU and the run's attention calls (attention_choice.h).
#include "train/attention_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention_implementation.h"

namespace nanoforge {
namespace {

// Every attention call a training step makes: one shape, one window per layer, scale 1/sqrt(head dim) as
// GPT::attention_scale.
ops::AttentionCalls run_attention_calls(const GPTConfig& model, int64_t batch, bool deterministic) {
  ops::AttentionCalls calls;
  calls.deterministic = deterministic;
  calls.batch = batch;
  calls.seq = model.sequence_len;
  calls.heads = model.n_head;
  calls.kv_heads = model.n_kv_head;
  calls.head_dim = model.head_dim();
  calls.scale = 1.0 / std::sqrt(static_cast<double>(model.head_dim()));
  calls.row_heads = 2 * model.n_kv_head + model.n_head;  // q, k, v are slices of GPT's vkq
  for (int64_t layer = 0; layer < model.n_layer; ++layer)
    calls.windows.push_back(model.window(layer));
  return calls;
}

std::string mib(int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace

absl::Status validate_attention_setting(const std::string& setting, const std::string& train_device) {
  if (std::find(std::begin(kAttentionSettings), std::end(kAttentionSettings), setting) ==
      std::end(kAttentionSettings)) {
    return absl::InvalidArgumentError(
        fmt::format("model.attention must be auto, cudnn or flash, got '{}'", setting));
  }
  if (setting != "cudnn") return absl::OkStatus();
  if (train_device == "cpu") {
    return absl::InvalidArgumentError(
        "model.attention=cudnn runs on the GPU, but train.device=cpu: use model.attention=auto (or flash) "
        "on the CPU");
  }
  std::string why;
  if (!ops::cudnn_attention_built(&why)) {
    return absl::InvalidArgumentError(
        fmt::format("model.attention=cudnn: {}; use model.attention=auto or flash", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<ChosenAttention> choose_attention(const std::string& setting, Device device,
                                                 const GPTConfig& model, int64_t batch, bool deterministic) {
  using ops::AttentionImplementation;
  if (device == Device::kCpu) {
    if (setting == "cudnn") {
      return absl::InvalidArgumentError(
          "model.attention=cudnn runs on the GPU, but this run is on the CPU: use model.attention=auto");
    }
    return ChosenAttention{
        AttentionImplementation::kFlash,
        fmt::format("attention: CPU reference (model.attention={} applies to GPU runs)", setting)};
  }
  if (setting == "flash")
    return ChosenAttention{AttentionImplementation::kFlash, "attention: flash (model.attention=flash)"};
  std::string built;
  const bool has_cudnn = ops::cudnn_attention_built(&built);
  int64_t workspace = 0;
  const absl::Status supported =
      has_cudnn ? ops::check_cudnn_attention(run_attention_calls(model, batch, deterministic), &workspace)
                : absl::FailedPreconditionError(built);
  if (!supported.ok()) {
    if (setting == "cudnn") {
      return absl::FailedPreconditionError(fmt::format(
          "model.attention=cudnn: {}; use model.attention=auto or flash", std::string(supported.message())));
    }
    return ChosenAttention{AttentionImplementation::kFlash,
                           fmt::format("attention: flash (model.attention=auto; no cuDNN: {})",
                                       std::string(supported.message()))};
  }
  return ChosenAttention{
      AttentionImplementation::kCudnn,
      fmt::format("attention: cudnn (model.attention={}; {}; workspace {} from the shared scratch)", setting,
                  built, mib(workspace))};
}

}  // namespace nanoforge
