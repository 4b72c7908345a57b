// `nanoforge sample --checkpoint PATH --prompt "..." [--max-tokens N --temperature T --top-k K --seed S]`.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "kernels/backend_info.h"
#include "support/status.h"
#include "train/checkpoint/model_file.h"
#include "train/generate.h"

ABSL_FLAG(std::string, prompt, "", "text to continue (BOS is put in front)");
ABSL_FLAG(int64_t, max_tokens, 64, "tokens to generate");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature; 0 picks the most likely token");
ABSL_FLAG(int64_t, top_k, 50, "sample among the k most likely tokens (0: all)");
ABSL_FLAG(int64_t, seed, 0, "sampling seed");

namespace nanoforge {
namespace {

absl::Status run_sample(const std::vector<std::string>&) {
  if (absl::GetFlag(FLAGS_checkpoint).empty()) return absl::InvalidArgumentError("--checkpoint is required");
  if (absl::GetFlag(FLAGS_max_tokens) < 1) return absl::InvalidArgumentError("--max-tokens must be >= 1");
  if (absl::GetFlag(FLAGS_temperature) < 0) return absl::InvalidArgumentError("--temperature must be >= 0");
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  NANOFORGE_ASSIGN_OR_RETURN(const Device device, device_from_flag());
  NANOFORGE_ASSIGN_OR_RETURN(
      CheckpointModel loaded,
      load_checkpoint_model(absl::GetFlag(FLAGS_checkpoint), absl::GetFlag(FLAGS_tokenizer), device));
  std::vector<int32_t> prompt = {loaded.tokenizer.bos_id()};
  loaded.tokenizer.encode(absl::GetFlag(FLAGS_prompt), prompt);
  SampleOptions options{absl::GetFlag(FLAGS_max_tokens), absl::GetFlag(FLAGS_temperature),
                        absl::GetFlag(FLAGS_top_k), static_cast<uint64_t>(absl::GetFlag(FLAGS_seed))};
  const std::vector<int32_t> generated = generate(*loaded.model, prompt, options);
  fmt::print("{}{}\n", absl::GetFlag(FLAGS_prompt), loaded.tokenizer.decode(generated));
  return absl::OkStatus();
}

}  // namespace

Command sample_command() {
  return {"sample",
          "generate text from a checkpoint",
          "--checkpoint PATH --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K] [--seed S] "
          "[--device cpu|cuda]",
          {"checkpoint", "tokenizer", "prompt", "max_tokens", "temperature", "top_k", "seed", "device",
           "threads"},
          run_sample};
}

}  // namespace nanoforge
