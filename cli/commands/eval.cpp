// `nanoforge eval --checkpoint PATH --data SHARDS [--eval-tokens N]`: validation bits per byte of a
// checkpoint on any shards made with the run's tokenizer.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <chrono>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "cli/progress_line.h"
#include "data/shards/shard_set.h"
#include "kernels/backend_info.h"
#include "support/status.h"
#include "train/checkpoint/model_file.h"
#include "train/evaluate.h"

ABSL_FLAG(int64_t, eval_tokens, 1 << 20, "tokens to evaluate (rounded down to whole batches, at least one)");
NANOFORGE_FLAG_LIMIT(eval_tokens, 1, 0x1p50);
ABSL_FLAG(int64_t, eval_batch, 8, "rows per forward pass");
NANOFORGE_FLAG_LIMIT(eval_batch, 1, 1 << 20);

namespace nanoforge {
namespace {

absl::Status run_eval(const std::vector<std::string>&) {
  if (absl::GetFlag(FLAGS_checkpoint).empty() || absl::GetFlag(FLAGS_data).empty()) {
    return absl::InvalidArgumentError("--checkpoint and --data are both required");
  }
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  NANOFORGE_ASSIGN_OR_RETURN(const Device device, device_from_flag());
  const int64_t batch = absl::GetFlag(FLAGS_eval_batch);
  NANOFORGE_ASSIGN_OR_RETURN(CheckpointModel loaded, load_checkpoint_model(absl::GetFlag(FLAGS_checkpoint),
                                                                           absl::GetFlag(FLAGS_tokenizer),
                                                                           device, {batch, "--eval-batch"}));
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<std::string> files,
                             list_split_shard_files(absl::GetFlag(FLAGS_data), "val"));
  ShardOpenOptions open;
  open.expect = {loaded.tokenizer.vocab_size(), loaded.tokenizer.bos_id(), loaded.tokenizer.hash()};
  NANOFORGE_ASSIGN_OR_RETURN(std::shared_ptr<const ShardSet> data, ShardSet::open(files, open));
  const int64_t seq = loaded.model->config().sequence_len, eval_tokens = absl::GetFlag(FLAGS_eval_tokens);
  if (eval_tokens > data->token_count()) {
    return absl::InvalidArgumentError(
        fmt::format("--eval-tokens {} exceeds the {} tokens of {}: an evaluation would read the same rows "
                    "again; give at most {}",
                    eval_tokens, data->token_count(), absl::GetFlag(FLAGS_data), data->token_count()));
  }
  LoaderOptions options{batch, seq};
  options.shuffle = false;
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, Loader::create(data, options));
  loaded.model->plan(batch, seq);
  const int64_t steps = std::max<int64_t>(1, eval_tokens / (batch * seq));
  const std::vector<int32_t> token_bytes = loaded.tokenizer.token_byte_lengths();
  // A long evaluation shows where it is, about once a second.
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  const auto progress = [&](int64_t done) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(1) && done < steps) return;
    last = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    print_progress(
        fmt::format("eval: {}/{} batches, ETA {}", done, steps,
                    format_seconds(seconds * static_cast<double>(steps - done) / static_cast<double>(done))),
        false);
  };
  NANOFORGE_ASSIGN_OR_RETURN(const BitsPerByteSums sums,
                             evaluate_bits_per_byte(*loaded.model, *loader, steps, token_bytes, progress));
  print_progress("", true);
  NANOFORGE_RETURN_IF_ERROR(sums.check_defined());
  fmt::print("checkpoint {} (step {}) on {}: val bpb {:.6f} over {} tokens, {} bytes\n",
             loaded.checkpoint_dir, loaded.trainer.step, data->describe(), sums.bits_per_byte(), sums.tokens,
             sums.bytes);
  return absl::OkStatus();
}

}  // namespace

Command eval_command() {
  return {"eval",
          "validation bits per byte of a checkpoint",
          "--checkpoint PATH --data SHARDS [--eval-tokens N] [--eval-batch B] [--device cpu|cuda]",
          {"checkpoint", "tokenizer", "data", "eval_tokens", "eval_batch", "device", "threads"},
          run_eval};
}

}  // namespace nanoforge
