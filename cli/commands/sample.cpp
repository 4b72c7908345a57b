// `nanoforge sample --checkpoint PATH --prompt "..." [--max-tokens N --temperature T --top-k K --seed S]`.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <cstdio>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "data/tokenizer/utf8_text.h"
#include "eval/generate.h"
#include "kernels/backend_info.h"
#include "model/gpt_config.h"
#include "support/status.h"
#include "train/checkpoint/model_file.h"

ABSL_FLAG(std::string, prompt, "", "text to continue (BOS is put in front)");
ABSL_FLAG(int64_t, max_tokens, 64, "tokens to generate");
NANOFORGE_FLAG_LIMIT(max_tokens, 1, 1 << 20);
ABSL_FLAG(double, temperature, 1.0, "sampling temperature; 0 picks the most likely token");
NANOFORGE_FLAG_LIMIT(temperature, 0, 1e6, "(0: the most likely token)");
ABSL_FLAG(int64_t, top_k, 50, "sample among the k most likely tokens (0: all)");
NANOFORGE_FLAG_LIMIT(top_k, 0, nanoforge::kMaxVocabSize, "(0: all)");
ABSL_FLAG(int64_t, seed, 0, "sampling seed");

namespace nanoforge {
namespace {

absl::Status run_sample(const std::vector<std::string>&) {
  if (absl::GetFlag(FLAGS_checkpoint).empty()) return absl::InvalidArgumentError("--checkpoint is required");
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  NANOFORGE_ASSIGN_OR_RETURN(const Device device, device_from_flag());
  NANOFORGE_ASSIGN_OR_RETURN(
      CheckpointModel loaded,
      load_checkpoint_model(absl::GetFlag(FLAGS_checkpoint), absl::GetFlag(FLAGS_tokenizer), device));
  std::vector<int32_t> prompt = {loaded.tokenizer.bos_id()};
  loaded.tokenizer.encode(absl::GetFlag(FLAGS_prompt), prompt);
  // Each token is printed as it is drawn (one forward pass each): a long sample shows its progress.
  fmt::print("{}", absl::GetFlag(FLAGS_prompt));
  std::fflush(stdout);
  SampleOptions options;
  options.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  options.temperature = absl::GetFlag(FLAGS_temperature);
  options.top_k = absl::GetFlag(FLAGS_top_k);
  options.seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
  // Tokens are bytes: a character split between two tokens waits for its rest, and bytes that are not UTF-8
  // print as U+FFFD, as nanochat's decode does (data/tokenizer/utf8_text.h).
  Utf8Stream text;
  options.on_token = [&](int32_t id) {
    fmt::print("{}", text.push(loaded.tokenizer.token_bytes(id)));
    std::fflush(stdout);
  };
  generate(*loaded.model, prompt, options);
  fmt::print("{}\n", text.finish());
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
