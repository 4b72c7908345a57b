// `nanoforge bench tokenizer [--tokenizer DIR] [--input FILES] [--bench-mb 16] [--passes 3] [--threads N]`:
// encode speed (nanochat's ordinary encoding, one document at a time, as prep does) on one thread and on
// all threads, in MB/s of UTF-8 input; the best of --passes passes. The last line is JSON. Without flags
// it runs on the committed golden tokenizer and documents (tests/data/tokenizer/golden), repeated to
// --bench-mb; meaningful numbers need a real tokenizer and text (docs/tokenizer.md has the measured ones and
// tools/dev/bench_tokenizer_reference.py times tiktoken on the same input).
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "cli/build_info.h"
#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "data/documents/documents.h"
#include "data/tokenizer/tokenizer.h"
#include "support/status.h"
#include "support/version.h"

ABSL_FLAG(int32_t, bench_mb, 16, "MB of input text to encode per pass (a smaller input is repeated)");
NANOFORGE_FLAG_LIMIT(bench_mb, 1, 4096);
ABSL_FLAG(int32_t, passes, 3, "timed passes over the text; the fastest is reported");
NANOFORGE_FLAG_LIMIT(passes, 1, 1000);

namespace nanoforge {
namespace {

struct EncodeTiming {
  double seconds = 0;
  int64_t tokens = 0;
};

// Encodes every document once on `threads` threads (documents handed out in order), returns the wall time.
EncodeTiming encode_all(const Tokenizer& tokenizer, const std::vector<std::string>& documents, int threads) {
  std::atomic<size_t> next{0};
  std::vector<int64_t> tokens(threads, 0);
  const auto start = std::chrono::steady_clock::now();
  auto work = [&](int t) {
    std::vector<int32_t> ids;
    for (size_t i = next++; i < documents.size(); i = next++) {
      ids.clear();
      tokenizer.encode(documents[i], ids);
      tokens[t] += static_cast<int64_t>(ids.size());
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back(work, t);
    for (std::thread& worker : workers)
      worker.join();
  }
  EncodeTiming timing;
  timing.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const int64_t count : tokens)
    timing.tokens += count;
  return timing;
}

EncodeTiming best_of(const Tokenizer& tokenizer, const std::vector<std::string>& documents, int threads,
                     int passes) {
  EncodeTiming best;
  for (int pass = 0; pass < passes; ++pass) {
    const EncodeTiming timing = encode_all(tokenizer, documents, threads);
    if (pass == 0 || timing.seconds < best.seconds) best = timing;
  }
  return best;
}

absl::Status run_bench_tokenizer(const std::vector<std::string>& /*arguments*/) {
  std::string tokenizer_dir = absl::GetFlag(FLAGS_tokenizer);
  std::vector<std::string> inputs = absl::GetFlag(FLAGS_input);
  if (tokenizer_dir.empty()) tokenizer_dir = golden_tokenizer_dir();
  if (inputs.empty()) inputs = {golden_tokenizer_dir() + "/tokenizer_train.jsonl"};
  const int64_t target_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_bench_mb)) * 1000 * 1000;
  const int passes = absl::GetFlag(FLAGS_passes);
  if (target_bytes <= 0 || passes < 1)
    return absl::InvalidArgumentError("--bench-mb and --passes must be >= 1");
  const int threads = absl::GetFlag(FLAGS_threads) > 0
                          ? absl::GetFlag(FLAGS_threads)
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  NANOFORGE_ASSIGN_OR_RETURN(const Tokenizer tokenizer, Tokenizer::load(tokenizer_dir));
  NANOFORGE_ASSIGN_OR_RETURN(const TextSplit text_split, parse_text_split(absl::GetFlag(FLAGS_text_split)));
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_document_paths(inputs));
  NANOFORGE_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::open(paths, text_split));
  std::vector<std::string> documents;
  int64_t input_bytes = 0;
  for (Document document; input_bytes < target_bytes;) {
    NANOFORGE_ASSIGN_OR_RETURN(const bool got, reader.next(document));
    if (!got) break;
    input_bytes += static_cast<int64_t>(document.text.size());
    documents.push_back(std::move(document.text));
  }
  if (input_bytes == 0) return absl::InvalidArgumentError("the input holds no text");
  const size_t distinct_documents = documents.size();
  int64_t bytes = input_bytes;
  for (size_t i = 0; bytes < target_bytes; ++i) {  // repeat a small input up to the target size
    documents.push_back(documents[i % distinct_documents]);
    bytes += static_cast<int64_t>(documents.back().size());
  }
  const double repeats = static_cast<double>(bytes) / input_bytes;

  fmt::print("tokenizer: {} (vocab {}, hash {})\n", tokenizer_dir, tokenizer.vocab_size(), tokenizer.hash());
  fmt::print("input: {} ({} documents, {:.2f} MB{}), {} passes\n", fmt::join(paths, ","), distinct_documents,
             input_bytes / 1e6,
             repeats > 1.001 ? fmt::format(", repeated {:.1f}x to {:.1f} MB", repeats, bytes / 1e6) : "",
             passes);
  encode_all(
      tokenizer,
      std::vector<std::string>(documents.begin(), documents.begin() + std::min<size_t>(64, documents.size())),
      1);
  const EncodeTiming single = best_of(tokenizer, documents, 1, passes);
  const EncodeTiming multi = threads > 1 ? best_of(tokenizer, documents, threads, passes) : single;
  const double single_mb_s = bytes / 1e6 / single.seconds;
  const double multi_mb_s = bytes / 1e6 / multi.seconds;
  const double bytes_per_token = static_cast<double>(bytes) / std::max<int64_t>(1, single.tokens);
  fmt::print("1 thread:   {:8.2f} MB/s, {:10.0f} tokens/s ({:.3f} s per pass)\n", single_mb_s,
             single.tokens / single.seconds, single.seconds);
  fmt::print("{} threads: {:8.2f} MB/s, {:10.0f} tokens/s ({:.3f} s per pass)\n", threads, multi_mb_s,
             multi.tokens / multi.seconds, multi.seconds);
  fmt::print("{} tokens, {:.3f} bytes per token\n", single.tokens, bytes_per_token);
  fmt::print(
      "{{\"bench\": \"tokenizer\", \"mb_per_s_1_thread\": {:.3f}, \"mb_per_s_threads\": {:.3f}, \"threads\": "
      "{}, "
      "\"tokens_per_s_1_thread\": {:.0f}, \"bytes\": {}, \"tokens\": {}, \"bytes_per_token\": {:.4f}, "
      "\"documents\": {}, \"vocab_size\": {}, \"tokenizer_hash\": \"{}\", \"passes\": {}, \"version\": "
      "\"{}\", "
      "\"commit\": \"{}\"}}\n",
      single_mb_s, multi_mb_s, threads, single.tokens / single.seconds, bytes, single.tokens, bytes_per_token,
      documents.size(), tokenizer.vocab_size(), tokenizer.hash(), passes, version(), git_commit());
  return absl::OkStatus();
}

}  // namespace

Command bench_tokenizer_command() {
  return {
      "bench tokenizer",
      "time ordinary encoding: MB/s on one thread and on all threads (last line: JSON)",
      "[--tokenizer DIR] [--input FILES|DIRS] [--bench-mb 16] [--passes 3] [--text-split paragraphs|file] "
      "[--threads N]",
      {"tokenizer", "input", "bench_mb", "passes", "text_split", "threads"},
      run_bench_tokenizer};
}

}  // namespace nanoforge
