// `nanoforge tokenizer train --input FILES --vocab-size N [--out DIR] [--max-chars N] [--doc-max-chars N]`:
// trains nanochat's byte-level BPE on text/JSONL/parquet documents (data/tokenizer/bpe_piece_counts.h,
// data/tokenizer/bpe_trainer.h) on all cores, with progress and ETA on stderr, and writes
// DIR/tokenizer.tiktoken + DIR/special_tokens.txt (DIR: $NANOFORGE_BASE_DIR/tokenizer unless given, and a
// directory of the tokenizer's own). The last line of stdout is a JSON record for scripts. SIGTERM/SIGINT
// end it at once (nothing is written before the end), but never between its two files.
#include <absl/flags/flag.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "cli/progress_line.h"
#include "data/documents/documents.h"
#include "data/tokenizer/bpe_piece_counts.h"
#include "data/tokenizer/bpe_trainer.h"
#include "data/tokenizer/tokenizer.h"
#include "model/gpt_config.h"
#include "support/base_dir.h"
#include "support/output_path.h"
#include "support/status.h"
#include "support/stop_signal.h"

// nanochat's scripts/tok_train.py defaults: vocab 32768 (specials included), documents cut to 10,000
// characters; it takes the first 2,000,000,000 characters, here 0 means "all of the input".
ABSL_FLAG(int32_t, vocab_size, 32768, "vocabulary size, nanochat's 9 special tokens included");
NANOFORGE_FLAG_LIMIT(vocab_size, 1, nanoforge::kMaxVocabSize);
ABSL_FLAG(int64_t, max_chars, 0, "stop after the document that passes this many characters (0: all input)");
NANOFORGE_FLAG_LIMIT(max_chars, 0, 0x1p62, "(0: all input)");
ABSL_FLAG(int64_t, doc_max_chars, 10000, "cut each document to this many characters (0: no cut)");
NANOFORGE_FLAG_LIMIT(doc_max_chars, 0, 0x1p40, "(0: no cut)");

namespace nanoforge {
namespace {

// tokenizer train has nothing to resume: a signal ends it at once, except while it publishes its files, where
// the exit waits for the end of the publication so that a tokenizer is never half-written.
constexpr StopSignalMessages kTokenizerTrainStopMessages = {
    "\nnanoforge: signal: exiting now (nothing half-written is published)\n", nullptr, nullptr};

void print_count_progress(const PieceCountProgress& p, bool final) {
  const double mb_per_s = p.seconds > 0 ? p.file_bytes_read / 1e6 / p.seconds : 0;
  double fraction = p.file_bytes_total > 0 ? static_cast<double>(p.file_bytes_read) / p.file_bytes_total : 0;
  if (p.max_chars > 0) fraction = std::max(fraction, static_cast<double>(p.chars) / p.max_chars);
  fraction = std::min(fraction, 1.0);
  const double eta = fraction > 0 ? p.seconds * (1 - fraction) / fraction : -1;
  print_progress(fmt::format("counting pieces: {:.1f} MB read ({:.0f}%), {} documents, {:.1f}M chars, "
                             "{:.1f} MB/s, {} {}",
                             p.file_bytes_read / 1e6, 100 * fraction, p.documents, p.chars / 1e6, mb_per_s,
                             final ? "took" : "ETA", format_seconds(final ? p.seconds : eta)),
                 final);
}

void print_merge_progress(const MergeProgress& p, bool final) {
  const double rate = p.seconds > 0 ? p.merges_done / p.seconds : 0;
  const double eta = rate > 0 ? (p.num_merges - p.merges_done) / rate : -1;
  print_progress(
      fmt::format("merging: {}/{} ({:.0f}%), {:.0f} merges/s, last pair count {}, {} {}", p.merges_done,
                  p.num_merges, 100.0 * p.merges_done / std::max(1, p.num_merges), rate, p.last_count,
                  final ? "took" : "ETA", format_seconds(final ? p.seconds : eta)),
      final);
}

// --out must hold nothing but a tokenizer's files. A tokenizer already there is replaced only with
// --overwrite: the shards prep made with it and the runs trained on them name it, and a new one would no
// longer match them. Checked before any reading or training.
absl::Status check_output_directory(const std::string& out) {
  NANOFORGE_RETURN_IF_ERROR(check_output_directory_is_own(
      "tokenizer train", "--out", out, Tokenizer::is_saved_file_name,
      absl::GetFlag(FLAGS_out).empty()
          ? fmt::format("give --out an empty or new directory, or set {} elsewhere", kBaseDirVariable)
          : fmt::format("pick an empty or new directory, or drop --out for the default ({})",
                        kDefaultTokenizerDirText)));
  if (absl::GetFlag(FLAGS_overwrite)) return absl::OkStatus();
  for (const char* file : {Tokenizer::kRanksFile, Tokenizer::kSpecialsFile}) {
    const std::filesystem::path path = std::filesystem::path(out) / file;
    std::error_code error;
    if (std::filesystem::exists(path, error)) {
      return absl::AlreadyExistsError(fmt::format(
          "--out {} already holds a tokenizer ({}): shards and runs made with it would no longer match a "
          "new one; give a new directory, or add --overwrite to replace it",
          out, path.filename().string()));
    }
  }
  return absl::OkStatus();
}

absl::Status run_tokenizer_train(const std::vector<std::string>& /*arguments*/) {
  const int32_t vocab_size = absl::GetFlag(FLAGS_vocab_size);
  const auto num_specials = static_cast<int32_t>(Tokenizer::special_token_names().size());
  if (absl::GetFlag(FLAGS_input).empty()) return absl::InvalidArgumentError("--input is required");
  NANOFORGE_ASSIGN_OR_RETURN(const std::string out,
                             directory_or_default("--out", absl::GetFlag(FLAGS_out), default_tokenizer_dir));
  if (vocab_size <= 256 + num_specials) {
    return absl::InvalidArgumentError(
        fmt::format("--vocab-size {} leaves no merges: it must exceed 256 bytes + {} specials", vocab_size,
                    num_specials));
  }
  if (absl::GetFlag(FLAGS_max_chars) < 0 || absl::GetFlag(FLAGS_doc_max_chars) < 0) {
    return absl::InvalidArgumentError("--max-chars and --doc-max-chars must be >= 0 (0: no limit)");
  }
  NANOFORGE_RETURN_IF_ERROR(check_output_directory(out));
  install_stop_handlers(OnStopSignal::kExit, kTokenizerTrainStopMessages);
  NANOFORGE_ASSIGN_OR_RETURN(const DocumentReadOptions read_options, document_read_options_from_flags());
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> paths,
                             expand_document_paths(absl::GetFlag(FLAGS_input)));
  NANOFORGE_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::open(paths, read_options));
  NANOFORGE_ASSIGN_OR_RETURN(const PieceSplitter splitter, PieceSplitter::create());
  const int threads = absl::GetFlag(FLAGS_threads) > 0
                          ? absl::GetFlag(FLAGS_threads)
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  fmt::print(
      "tokenizer train: {} input files ({:.1f} MB), vocab {} = 256 bytes + {} merges + {} specials, "
      "{} threads\n",
      paths.size(), reader.total_bytes() / 1e6, vocab_size, vocab_size - 256 - num_specials, num_specials,
      threads);
  std::fflush(stdout);

  PieceCountOptions count_options;
  count_options.max_chars = absl::GetFlag(FLAGS_max_chars);
  count_options.doc_max_chars = absl::GetFlag(FLAGS_doc_max_chars);
  count_options.threads = threads;
  PieceCountProgress last_count_progress;
  count_options.progress = [&](const PieceCountProgress& p) {
    last_count_progress = p;
    print_count_progress(p, p.finished);
  };
  NANOFORGE_ASSIGN_OR_RETURN(const PieceCounts counts, count_pieces(reader, splitter, count_options));
  if (counts.total_pieces == 0) {
    return absl::InvalidArgumentError(
        fmt::format("the input ({} files) holds no text to train on", paths.size()));
  }

  BpeTrainOptions train_options;
  train_options.num_merges = vocab_size - 256 - num_specials;
  train_options.threads = threads;
  train_options.progress = [&](const MergeProgress& p) { print_merge_progress(p, p.finished); };
  BpeTrainResult result = train_bpe(counts, train_options);
  if (result.merges < train_options.num_merges) {
    fmt::print(
        stderr,
        "warning: the input ran out of pairs after {} of {} merges: the vocabulary has {} tokens, not {}\n",
        result.merges, train_options.num_merges, result.tokens_by_rank.size() + num_specials, vocab_size);
  }
  if (result.skipped_long_pairs > 0) {
    fmt::print("skipped {} pairs whose token would exceed {} bytes (text repeating itself at length)\n",
               result.skipped_long_pairs, Tokenizer::kMaxTokenBytes);
  }
  fmt::print("building the tokenizer's merge tables ({} tokens)\n", result.tokens_by_rank.size());
  std::fflush(stdout);
  NANOFORGE_ASSIGN_OR_RETURN(const Tokenizer tokenizer,
                             Tokenizer::from_ranks(std::move(result.tokens_by_rank)));
  begin_publishing();  // a signal now waits until both files are in place
  const absl::Status saved = tokenizer.save(out);
  end_publishing();
  NANOFORGE_RETURN_IF_ERROR(saved);

  const double count_seconds = last_count_progress.seconds;
  fmt::print("read {} documents, {:.1f}M characters ({:.1f} MB), {} pieces ({} distinct) in {:.1f} s\n",
             counts.documents, counts.chars / 1e6, counts.bytes / 1e6, counts.total_pieces,
             counts.pieces.size(), count_seconds);
  fmt::print(
      "learned {} merges in {:.1f} s ({} initial pairs{}); wrote {} (vocab {}, bos {}, hash {})\n",
      result.merges, result.seconds, result.initial_pairs,
      result.reused_merges ? fmt::format(", {} merges reused an existing token", result.reused_merges) : "",
      out, tokenizer.vocab_size(), tokenizer.bos_id(), tokenizer.hash());
  fmt::print(
      "{{\"command\": \"tokenizer train\", \"vocab_size\": {}, \"merges\": {}, \"reused_merges\": {}, "
      "\"documents\": {}, \"chars\": {}, \"bytes\": {}, \"distinct_pieces\": {}, \"count_seconds\": {:.3f}, "
      "\"merge_seconds\": {:.3f}, \"total_seconds\": {:.3f}, \"threads\": {}, \"hash\": \"{}\", \"out\": "
      "\"{}\"}}\n",
      tokenizer.vocab_size(), result.merges, result.reused_merges, counts.documents, counts.chars,
      counts.bytes, counts.pieces.size(), count_seconds, result.seconds, count_seconds + result.seconds,
      threads, tokenizer.hash(), out);
  return absl::OkStatus();
}

}  // namespace

Command tokenizer_train_command() {
  return {"tokenizer train",
          "train nanochat's byte-level BPE on text/JSONL/parquet files, on all cores (last line: JSON)",
          "--input FILES|DIRS|GLOBS|- [--out DIR] [--vocab-size 32768] [--max-chars N] "
          "[--doc-max-chars 10000] [--text-split paragraphs|file] [--text-column text] [--overwrite] "
          "[--threads N]",
          {"input", "out", "vocab_size", "max_chars", "doc_max_chars", "text_split", "text_column",
           "overwrite", "threads"},
          run_tokenizer_train,
          /*takes_arguments=*/false,
          {{"out", fmt::format("the tokenizer directory to write: empty, new, or holding only a tokenizer's "
                               "files (default: {}; {} defaults to ~/.cache/nanoforge)",
                               kDefaultTokenizerDirText, kBaseDirVariable)}}};
}

}  // namespace nanoforge
