// `nanoforge prep --input FILES... [--tokenizer DIR] [--out DIR] [--shard-tokens N] [--val-docs N]`: raw text
// (JSONL, text, compressed, parquet, standard input) to train and val token shards (data/prep/prep.h), with
// progress (documents/s, MB/s, ETA) and a closing line with the input and text throughput. The tokenizer and
// the shards default to $NANOFORGE_BASE_DIR/tokenizer and /shards. SIGTERM/SIGINT stop it at the next
// document with its finished shards recorded; --resume continues it.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <fstream>
#include <iterator>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "cli/progress_line.h"
#include "data/prep/prep.h"
#include "kernels/backend_info.h"
#include "support/base_dir.h"
#include "support/status.h"
#include "support/stop_signal.h"

ABSL_FLAG(int64_t, shard_tokens, 100'000'000,
          "tokens per shard (a shard closes once it holds at least this many)");
NANOFORGE_FLAG_LIMIT(shard_tokens, 1, 0x1p31, "(a shard is held in memory until written)");
ABSL_FLAG(int64_t, val_docs, 1000, "the first N documents form the validation split");
NANOFORGE_FLAG_LIMIT(val_docs, 0, 0x1p40);

namespace nanoforge {
namespace {

// A signal stops prep between documents with its finished shards recorded (resumable); a second ends it at
// once, which its records survive as they survive SIGKILL.
constexpr StopSignalMessages kPrepStopMessages = {
    nullptr, "\nnanoforge: stopping at the next document (a second signal stops at once)\n",
    "\nnanoforge: signal: exiting now (nothing half-written is published)\n"};

// This process's command line (/proc/self/cmdline), arguments holding spaces quoted: the manifest records it.
std::string command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::string line;
  for (size_t begin = 0; begin < raw.size();) {
    const size_t end = std::min(raw.find('\0', begin), raw.size());
    const std::string argument = raw.substr(begin, end - begin);
    if (!line.empty()) line += ' ';
    line += argument.find_first_of(" \t'\"") == std::string::npos ? argument : "'" + argument + "'";
    begin = end + 1;
  }
  return line;
}

absl::Status run_prep(const std::vector<std::string>& /*arguments*/) {
  if (absl::GetFlag(FLAGS_input).empty())
    return absl::InvalidArgumentError("--input is required (see nanoforge prep --help)");
  NANOFORGE_ASSIGN_OR_RETURN(
      const std::string tokenizer_dir,
      directory_or_default("--tokenizer", absl::GetFlag(FLAGS_tokenizer), default_tokenizer_dir));
  PrepOptions options;
  NANOFORGE_ASSIGN_OR_RETURN(options.out_dir,
                             directory_or_default("--out", absl::GetFlag(FLAGS_out), default_shards_dir));
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  absl::StatusOr<Tokenizer> loaded = Tokenizer::load(tokenizer_dir);
  if (!loaded.ok() && absl::GetFlag(FLAGS_tokenizer).empty()) {
    return absl::Status(
        loaded.status().code(),
        fmt::format("{} (no --tokenizer given: the default, {}; train one there with `nanoforge "
                    "tokenizer train`, or give --tokenizer DIR)",
                    std::string(loaded.status().message()), kDefaultTokenizerDirText));
  }
  NANOFORGE_RETURN_IF_ERROR(loaded.status());
  const Tokenizer tokenizer = std::move(*loaded);
  options.inputs = absl::GetFlag(FLAGS_input);
  NANOFORGE_ASSIGN_OR_RETURN(options.documents, document_read_options_from_flags());
  options.shard_tokens = absl::GetFlag(FLAGS_shard_tokens);
  options.val_docs = absl::GetFlag(FLAGS_val_docs);
  options.overwrite = absl::GetFlag(FLAGS_overwrite);
  options.resume = absl::GetFlag(FLAGS_resume);
  options.command_line = command_line();
  install_stop_handlers(OnStopSignal::kAskToStop, kPrepStopMessages);
  options.stop_requested = [] { return stop_signal() != 0; };
  fmt::print("prep: tokenizer {} (vocab {}, hash {}), shards to {}, {} threads\n", tokenizer_dir,
             tokenizer.vocab_size(), tokenizer.hash(), options.out_dir, backend_info().cpu_threads);
  std::fflush(stdout);
  auto progress = [](const PrepProgress& p) {
    const double fraction = p.total_bytes > 0 ? static_cast<double>(p.bytes_read) / p.total_bytes : 0;
    const double eta = fraction > 0 ? p.seconds * (1 - fraction) / fraction : -1;
    print_progress(
        fmt::format("prep: {:.0f}% | {} documents ({:.0f}/s) | {:.1f} MB/s | {:.1f}M tokens | ETA {}",
                    100 * fraction, p.documents, p.documents / std::max(p.seconds, 1e-9),
                    p.bytes_read / 1e6 / std::max(p.seconds, 1e-9), p.tokens / 1e6, format_seconds(eta)),
        false);
  };
  NANOFORGE_ASSIGN_OR_RETURN(const PrepResult result, prep_shards(tokenizer, options, progress));
  print_progress("", true);
  if (result.already_complete) {
    fmt::print("prep: {} is complete already (its manifest.txt is there): nothing to resume\n",
               options.out_dir);
    return absl::OkStatus();
  }
  if (result.resumed_shards > 0)
    fmt::print("prep: resumed after the {} shards recorded by the interrupted prep\n", result.resumed_shards);
  if (!result.removed_shards.empty())
    fmt::print("prep: --overwrite deleted {} earlier shard files\n", result.removed_shards.size());
  if (result.empty_docs > 0) fmt::print("prep: skipped {} empty documents\n", result.empty_docs);
  fmt::print(
      "prep: {} train documents ({} tokens) and {} val documents ({} tokens) in {} shards under {}, {}\n",
      result.train_docs, result.train_tokens, result.val_docs, result.val_tokens,
      result.shards.size() + static_cast<size_t>(result.resumed_shards), options.out_dir,
      format_seconds(result.seconds));
  const double seconds = std::max(result.seconds, 1e-9);
  fmt::print("prep: read {:.1f} MB of input ({:.1f} MB/s), {:.1f} MB of text ({:.1f} MB/s){}\n",
             result.input_bytes / 1e6, result.input_bytes / 1e6 / seconds, result.text_bytes / 1e6,
             result.text_bytes / 1e6 / seconds,
             result.null_texts > 0 ? fmt::format("; {} null texts skipped", result.null_texts) : "");
  return absl::OkStatus();
}

}  // namespace

Command prep_command() {
  return {"prep",
          "tokenize documents into train and val token shards",
          "--input FILES|DIRS|GLOBS|- [--tokenizer DIR] [--out DIR] [--shard-tokens N] [--val-docs N] "
          "[--text-split paragraphs|file] [--text-column text] [--overwrite | --resume]",
          {"input", "tokenizer", "out", "shard_tokens", "val_docs", "text_split", "text_column", "overwrite",
           "resume", "threads"},
          run_prep,
          /*takes_arguments=*/false,
          {{"tokenizer", fmt::format("the tokenizer directory (tokenizer train's --out) (default: {}; {} "
                                     "defaults to ~/.cache/nanoforge)",
                                     kDefaultTokenizerDirText, kBaseDirVariable)},
           {"out", fmt::format("the shard directory to write: empty, new, or holding only prep's own files "
                               "(default: {})",
                               kDefaultShardsDirText)},
           {"resume",
            "continue the unfinished prep in --out (stopped by a signal or killed) from its last "
            "recorded shard, with the same --input, --tokenizer and settings (checked); a finished "
            "one is left as it is (default: false)"}}};
}

}  // namespace nanoforge
