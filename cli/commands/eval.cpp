// `nanoforge eval --checkpoint PATH --data SHARDS [--eval-tokens N]`: validation bits per byte of a
// checkpoint on any shards made with the run's tokenizer.
// `nanoforge eval --core BUNDLE --checkpoint PATH [--max-per-task N]`: nanochat's CORE metric (eval/core/),
// on one process or data-parallel under mpirun.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "cli/progress_line.h"
#include "data/shards/shard_manifest.h"
#include "data/shards/shard_set.h"
#include "dist/create_communicator.h"
#include "eval/bits_per_byte.h"
#include "eval/core/core_eval.h"
#include "eval/core/core_report.h"
#include "kernels/backend_info.h"
#include "support/output_path.h"
#include "support/status.h"
#include "train/checkpoint/model_file.h"

ABSL_FLAG(int64_t, eval_tokens, 1 << 20, "tokens to evaluate (rounded down to whole batches, at least one)");
NANOFORGE_FLAG_LIMIT(eval_tokens, 1, 0x1p50);
ABSL_FLAG(int64_t, eval_batch, 8, "rows per forward pass");
NANOFORGE_FLAG_LIMIT(eval_batch, 1, 1 << 20);
ABSL_FLAG(std::string, core, "",
          "evaluate CORE on this eval bundle (core.yaml, eval_meta_data.csv, eval_data/)");
ABSL_FLAG(int64_t, max_per_task, -1, "CORE: examples per task after nanochat's shuffle (-1: all)");
NANOFORGE_FLAG_LIMIT(max_per_task, 1, 1e9, "", -1);

namespace nanoforge {
namespace {

// The results file may go into the checkpoint directory (core.json, the default) but never over one of the
// checkpoint's own files: checked before the evaluation, which can take minutes.
absl::Status check_core_out(const std::string& out, const std::string& checkpoint_dir) {
  NANOFORGE_RETURN_IF_ERROR(check_output_file_path(out));
  std::error_code error;
  for (std::filesystem::directory_iterator entry(checkpoint_dir, error), end; !error && entry != end;
       entry.increment(error)) {
    if (entry->path().filename() != "core.json" && same_existing_file(out, entry->path().string())) {
      return absl::InvalidArgumentError(fmt::format(
          "--out {} would replace {} of checkpoint {}: give a path outside it (default: core.json in it)",
          out, entry->path().filename().string(), checkpoint_dir));
    }
  }
  return absl::OkStatus();
}

// CORE: rank 0 prints a line per task, the table and nanochat's JSON record last, and writes the results
// file (--out, else core.json in the checkpoint directory).
absl::Status run_core_eval() {
  if (absl::GetFlag(FLAGS_checkpoint).empty()) return absl::InvalidArgumentError("--checkpoint is required");
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  NANOFORGE_ASSIGN_OR_RETURN(const Device device, device_from_flag());
  NANOFORGE_ASSIGN_OR_RETURN(const CoreBundle bundle, CoreBundle::read(absl::GetFlag(FLAGS_core)));
  // Every task against --max-per-task before the model is loaded: nothing is scored when one cannot run.
  NANOFORGE_RETURN_IF_ERROR(
      check_core_max_per_task(bundle, absl::GetFlag(FLAGS_max_per_task), "--max-per-task"));
  // Before the model: the NCCL engine binds this rank's GPU first.
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> communicator, create_communicator(device, {}));
  NANOFORGE_ASSIGN_OR_RETURN(
      CheckpointModel loaded,
      load_checkpoint_model(absl::GetFlag(FLAGS_checkpoint), absl::GetFlag(FLAGS_tokenizer), device));
  const bool chief = communicator->rank() == 0;
  const std::string out =
      absl::GetFlag(FLAGS_out).empty() ? loaded.checkpoint_dir + "/core.json" : absl::GetFlag(FLAGS_out);
  NANOFORGE_RETURN_IF_ERROR(check_core_out(out, loaded.checkpoint_dir));
  CoreEvalOptions options;
  options.max_per_task = absl::GetFlag(FLAGS_max_per_task);
  options.on_task = [&](const CoreTaskResult& task) {
    if (chief) fmt::print("{}\n", core_task_line(task));
    std::fflush(stdout);
  };
  if (chief) {
    fmt::print("CORE of {} (step {}) on {} tasks, {} examples, {} rank{} on {}\n", loaded.checkpoint_dir,
               loaded.trainer.step, bundle.tasks.size(), bundle.example_count(), communicator->world_size(),
               communicator->world_size() > 1 ? "s" : "", device_name(device));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const CoreResults results,
                             evaluate_core(*loaded.model, loaded.tokenizer, bundle, options, *communicator));
  if (!chief) return absl::OkStatus();
  NANOFORGE_RETURN_IF_ERROR(
      write_core_file(out, results,
                      {loaded.checkpoint_dir, bundle.dir, device_name(device), loaded.trainer.step,
                       options.max_per_task, communicator->world_size()}));
  fmt::print("{}CORE metric: {:.4f} ({} examples in {:.1f}s; results in {})\n{}\n", core_table(results),
             results.core_metric, results.examples, results.seconds, out, core_json(results));
  return absl::OkStatus();
}

absl::Status run_eval(const std::vector<std::string>&) {
  if (!absl::GetFlag(FLAGS_core).empty()) return run_core_eval();
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
  NANOFORGE_RETURN_IF_ERROR(check_shard_manifests(absl::GetFlag(FLAGS_data), "val", *data).status());
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
          "validation bits per byte, or nanochat's CORE metric, of a checkpoint",
          "--checkpoint PATH --data SHARDS [--eval-tokens N] [--eval-batch B] [--device cpu|cuda]\n"
          "       nanoforge eval --core BUNDLE --checkpoint PATH [--max-per-task N] [--out FILE] "
          "[--device cpu|cuda]   (mpirun: data-parallel)",
          {"checkpoint", "tokenizer", "data", "eval_tokens", "eval_batch", "core", "max_per_task", "out",
           "device", "threads"},
          run_eval};
}

}  // namespace nanoforge
