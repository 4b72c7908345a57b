// `nanoforge bench loader [--data DIR|FILES] --batch B --seq T [--world-size W --rank R] [--steps N]`: how
// fast the data loader hands one rank its (B, T+1) batches, against what a GPU consumes. Without --data it
// writes synthetic shards (log-normal document lengths, or the lengths listed in --doc-lengths) to a
// temporary directory. Phases: open (and verify) the shards; drain batches as fast as possible (the loader's
// throughput: the consumer waits on the producer by construction); then consume at a pace slower than the
// producer (2x its batch time unless --step-ms) and count the batches that had to wait (should be none).
// Last line: JSON.
#include <absl/flags/flag.h>
#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_replace.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string_view>
#include <thread>

#include "cli/bench/bench_flags.h"
#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "data/loader/loader.h"
#include "data/shards/shard_manifest.h"
#include "data/shards/shard_set.h"
#include "data/shards/shard_writer.h"
#include "support/status.h"
#include "support/temporary_directory.h"
#include "support/version.h"

ABSL_FLAG(std::string, split, "train", "which shards of a directory: files named like train_00000.h5");
ABSL_FLAG(int64_t, world_size, 1, "data-parallel ranks: global row g goes to rank g mod world_size");
NANOFORGE_FLAG_LIMIT(world_size, 1, 65536);
ABSL_FLAG(int64_t, rank, 0, "this rank, in [0, world_size)");
NANOFORGE_FLAG_LIMIT(rank, 0, 65535, "(and below --world-size)");
ABSL_FLAG(uint64_t, data_seed, 0, "shuffle seed of the document order");
ABSL_FLAG(int64_t, doc_buffer, 1000, "documents the best-fit packer chooses from (nanochat: 1000)");
NANOFORGE_FLAG_LIMIT(doc_buffer, 1, 1 << 20);
ABSL_FLAG(bool, verify, true, "check every token of every shard on open (else lazily, as batches are made)");
ABSL_FLAG(double, step_ms, 0, "paced phase: consumer time per batch (0: twice the measured batch time)");
NANOFORGE_FLAG_LIMIT(step_ms, 0, 1e6, "(0: twice the measured batch time)");
ABSL_FLAG(int64_t, bin_vocab, 50257, "vocabulary of llm.c .bin shards (they do not record it; GPT-2: 50257)");
NANOFORGE_FLAG_LIMIT(bin_vocab, 1, 0x1p32);
ABSL_FLAG(int32_t, bin_bos_id, 50256, "BOS of llm.c .bin shards, where documents start (GPT-2: 50256)");
NANOFORGE_FLAG_LIMIT(bin_bos_id, 0, 0x1p31 - 1);
ABSL_FLAG(int64_t, synthetic_tokens, 50'000'000, "synthetic data: tokens to write");
NANOFORGE_FLAG_LIMIT(synthetic_tokens, 1, 0x1p32, "(written to a temporary directory)");
ABSL_FLAG(double, doc_tokens_median, 450, "synthetic data: median document length in tokens (log-normal)");
NANOFORGE_FLAG_LIMIT(doc_tokens_median, 1, 1 << 20);
ABSL_FLAG(double, doc_tokens_sigma, 1.2, "synthetic data: sigma of the log of document lengths");
NANOFORGE_FLAG_LIMIT(doc_tokens_sigma, 0, 10);
ABSL_FLAG(
    std::string, doc_lengths, "",
    "synthetic data: a text file of document lengths in tokens, one per line, cycled (e.g. measured on a "
    "real corpus) instead of the log-normal");

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// nanochat's vocabulary and BOS, so synthetic shards look like prep's.
constexpr int64_t kSyntheticVocab = 32768;
constexpr int32_t kSyntheticBos = 32759;
constexpr int64_t kSyntheticShardTokens = 25'000'000;
constexpr int64_t kMaxSyntheticDocTokens = 1'000'000;
// What one GPU consumes at depth 20, tokens/s: the issue's figure, and one derived from nanochat's
// leaderboard (d24 at ~123K tok/s per H100; d20 needs ~0.6x the FLOPs per token).
constexpr double kD20TokensPerSecondIssue = 20'000;
constexpr double kD20TokensPerSecondH100 = 200'000;

// --doc-lengths: one length per line, each in [1, kMaxSyntheticDocTokens] (a document is held in memory
// while written); blank lines are skipped, anything else is an error naming the line.
absl::StatusOr<std::vector<int64_t>> read_lengths(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(fmt::format("--doc-lengths {}: cannot read it", path));
  std::vector<int64_t> lengths;
  int64_t line_number = 0;
  for (std::string line; std::getline(file, line);) {
    ++line_number;
    const std::string text(absl::StripAsciiWhitespace(line));
    if (text.empty()) continue;
    int64_t length = 0;
    if (!absl::SimpleAtoi(text, &length) || length < 1 || length > kMaxSyntheticDocTokens) {
      return absl::InvalidArgumentError(
          fmt::format("--doc-lengths {}:{}: \"{}\" is not a document length in tokens in [1, {}]", path,
                      line_number, text.substr(0, 40), kMaxSyntheticDocTokens));
    }
    lengths.push_back(length);
  }
  if (lengths.empty()) return absl::InvalidArgumentError(fmt::format("--doc-lengths {}: no lengths", path));
  return lengths;
}

// Writes synthetic shards (documents of random tokens) and returns their paths.
absl::StatusOr<std::vector<std::string>> write_synthetic_shards(const std::string& dir) {
  std::vector<int64_t> listed;
  if (!absl::GetFlag(FLAGS_doc_lengths).empty()) {
    NANOFORGE_ASSIGN_OR_RETURN(listed, read_lengths(absl::GetFlag(FLAGS_doc_lengths)));
  }
  std::mt19937_64 generator(1234);
  std::lognormal_distribution<double> lognormal(std::log(absl::GetFlag(FLAGS_doc_tokens_median)),
                                                absl::GetFlag(FLAGS_doc_tokens_sigma));
  std::uniform_int_distribution<int32_t> token(0, kSyntheticBos - 1);
  const int64_t total_tokens = absl::GetFlag(FLAGS_synthetic_tokens);
  std::vector<std::string> paths;
  std::vector<int32_t> text;
  int64_t written = 0, doc = 0;
  while (written < total_tokens) {
    const std::string path = dir + "/" + shard_file_name("train", static_cast<int64_t>(paths.size()));
    NANOFORGE_ASSIGN_OR_RETURN(ShardWriter writer,
                               ShardWriter::create(path, {kSyntheticVocab, kSyntheticBos, "synthetic"}));
    while (writer.token_count() < kSyntheticShardTokens && written < total_tokens) {
      const int64_t length =
          listed.empty() ? std::clamp<int64_t>(std::llround(lognormal(generator)), 1, kMaxSyntheticDocTokens)
                         : listed[static_cast<size_t>(doc % static_cast<int64_t>(listed.size()))];
      ++doc;
      text.resize(static_cast<size_t>(length - 1));
      for (int32_t& id : text)
        id = token(generator);
      NANOFORGE_RETURN_IF_ERROR(writer.append_document(text));
      written += length;
    }
    NANOFORGE_RETURN_IF_ERROR(writer.finish());
    paths.push_back(path);
  }
  return paths;
}

// The synthetic data's flags do nothing with --data, and --doc-lengths replaces the log-normal: a flag
// given for nothing is refused rather than silently ignored.
absl::Status check_data_flags(bool synthetic) {
  for (const char* flag : {"synthetic_tokens", "doc_tokens_median", "doc_tokens_sigma", "doc_lengths"}) {
    const std::string name = absl::StrReplaceAll(flag, {{"_", "-"}});
    if (!synthetic && flag_given(flag)) {
      return absl::InvalidArgumentError(fmt::format(
          "--{} describes the synthetic data bench loader writes without --data: drop it, or drop --data",
          name));
    }
    if (std::string_view(flag).starts_with("doc_tokens") && flag_given(flag) && flag_given("doc_lengths")) {
      return absl::InvalidArgumentError(fmt::format(
          "--{} shapes the log-normal document lengths, which --doc-lengths replaces: drop one of them",
          name));
    }
  }
  return absl::OkStatus();
}

// --bin-vocab and --bin-bos-id describe llm.c .bin shards, which record neither: refused for other data.
absl::Status check_bin_flags(bool any_bin) {
  for (const char* flag : {"bin_vocab", "bin_bos_id"}) {
    if (!any_bin && flag_given(flag)) {
      return absl::InvalidArgumentError(fmt::format(
          "--{} describes llm.c .bin shards, and the data has none (.h5 shards record their vocabulary "
          "and BOS): drop it",
          absl::StrReplaceAll(flag, {{"_", "-"}})));
    }
  }
  return absl::OkStatus();
}

// The shards bench loader reads: --data's, or synthetic ones in a temporary directory that lives as long as
// this; opened (every token verified unless --verify=false) as a run opens them, and described.
struct BenchData {
  std::optional<TemporaryDirectory> synthetic_dir;
  std::shared_ptr<const ShardSet> shards;
  bool synthetic = false;
  bool verified = false;
  double open_seconds = 0;
};

absl::StatusOr<BenchData> open_bench_data() {
  BenchData bench;
  std::vector<std::string> paths;
  bench.synthetic = absl::GetFlag(FLAGS_data).empty();
  NANOFORGE_RETURN_IF_ERROR(check_data_flags(bench.synthetic));
  if (!bench.synthetic) {
    NANOFORGE_ASSIGN_OR_RETURN(paths,
                               list_shard_files(absl::GetFlag(FLAGS_data), absl::GetFlag(FLAGS_split)));
  }
  // Before anything is written: the synthetic shards are .h5.
  const bool any_bin = std::any_of(paths.begin(), paths.end(), [](const std::string& path) {
    return std::filesystem::path(path).extension() == ".bin";
  });
  NANOFORGE_RETURN_IF_ERROR(check_bin_flags(any_bin));
  Clock::time_point start = Clock::now();
  if (bench.synthetic) {
    NANOFORGE_ASSIGN_OR_RETURN(
        bench.synthetic_dir,
        TemporaryDirectory::create(std::filesystem::temp_directory_path(), "nanoforge_bench_loader_"));
    NANOFORGE_ASSIGN_OR_RETURN(paths, write_synthetic_shards(bench.synthetic_dir->path()));
    fmt::print("wrote {} synthetic shard(s) in {:.1f} s to {}\n", paths.size(), seconds_since(start),
               bench.synthetic_dir->path());
  }
  ShardOpenOptions open_options;
  open_options.verify_tokens = bench.verified = absl::GetFlag(FLAGS_verify);
  if (any_bin) {
    open_options.expect.vocab_size = absl::GetFlag(FLAGS_bin_vocab);
    open_options.expect.bos_id = absl::GetFlag(FLAGS_bin_bos_id);
  }
  start = Clock::now();
  NANOFORGE_ASSIGN_OR_RETURN(bench.shards, ShardSet::open(paths, open_options));
  const ShardSet& data = *bench.shards;
  if (!bench.synthetic) {
    NANOFORGE_RETURN_IF_ERROR(
        check_shard_manifests(absl::GetFlag(FLAGS_data), absl::GetFlag(FLAGS_split), data).status());
  }
  bench.open_seconds = seconds_since(start);
  const double shard_gigabytes =
      static_cast<double>(data.token_count() * data.shard(0).bytes_per_token()) / 1e9;
  fmt::print("data: {} ({} tokens; vocab {}, BOS {}); opened in {:.3f} s{}\n", data.describe(),
             data.shard(0).bytes_per_token() == 2 ? "uint16" : "uint32", data.vocab_size(), data.bos_id(),
             bench.open_seconds,
             bench.verified
                 ? fmt::format(", every token verified ({:.2f} GB/s)", shard_gigabytes / bench.open_seconds)
                 : std::string(" (structure only; tokens checked as batches are made)"));
  return bench;
}

// What the loader measured: its first batch, the drain (as fast as it goes) and the paced phase's waits.
struct LoaderTimes {
  double first_batch_seconds = 0;
  int64_t drained = 0;
  double drain_seconds = 0;
  double tokens_per_second = 0, batch_ms = 0, rows_per_second = 0;
  double step_ms = 0;  // the paced consumer's time per batch
  LoaderWaitStats waits;
  LoaderState state;
};

// `steps`: the batches to drain; without, as many as fit in 3 s (at least 10).
absl::StatusOr<LoaderTimes> time_loader(const std::shared_ptr<const ShardSet>& data,
                                        const LoaderOptions& options, std::optional<int64_t> steps) {
  LoaderTimes times;
  Clock::time_point start = Clock::now();
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, Loader::create(data, options));
  NANOFORGE_RETURN_IF_ERROR(loader->next().status());
  times.first_batch_seconds = seconds_since(start);

  // Drain: as fast as the loader goes.
  const int64_t batch_tokens = options.batch_rows * options.sequence_length;
  start = Clock::now();
  while (steps ? times.drained < *steps : (seconds_since(start) < 3.0 || times.drained < 10)) {
    NANOFORGE_RETURN_IF_ERROR(loader->next().status());
    ++times.drained;
  }
  times.drain_seconds = seconds_since(start);
  times.tokens_per_second = static_cast<double>(times.drained * batch_tokens) / times.drain_seconds;
  times.batch_ms = 1e3 * times.drain_seconds / static_cast<double>(times.drained);
  times.rows_per_second =
      static_cast<double>(times.drained * options.batch_rows * options.world_size) / times.drain_seconds;

  // Paced: a consumer slower than the producer must never wait once the ring is full.
  times.step_ms = absl::GetFlag(FLAGS_step_ms) > 0 ? absl::GetFlag(FLAGS_step_ms) : 2 * times.batch_ms;
  const int64_t paced =
      std::clamp<int64_t>(static_cast<int64_t>(2000 / std::max(times.step_ms, 1e-3)), 20, 200);
  NANOFORGE_RETURN_IF_ERROR(loader->restore(loader->state()));  // fresh wait statistics, same stream
  NANOFORGE_RETURN_IF_ERROR(loader->next().status());
  for (int64_t i = 1; i < paced; ++i) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(times.step_ms));
    NANOFORGE_RETURN_IF_ERROR(loader->next().status());
  }
  times.waits = loader->wait_stats();
  times.state = loader->state();
  return times;
}

// The report: the loader's shape, the three phases against what a GPU consumes, the packing; last, JSON.
void print_loader_report(const LoaderOptions& options, const BenchData& bench, const LoaderTimes& times) {
  const LoaderWaitStats& waits = times.waits;
  const LoaderState& state = times.state;
  const ShardSet& data = *bench.shards;
  fmt::print("loader: rank {} of {}, batch {} x {} (+1), {}-document buffer, {} rows in all per step\n",
             options.rank, options.world_size, options.batch_rows, options.sequence_length,
             options.doc_buffer_size, options.batch_rows * options.world_size);
  fmt::print("first batch after start: {:.2f} ms\n", 1e3 * times.first_batch_seconds);
  fmt::print(
      "drain: {} batches in {:.3f} s = {:.3f} ms/batch; {:.1f} M tokens/s for this rank, {:.2f} M global "
      "rows/s planned ({:.2f} us/row)\n",
      times.drained, times.drain_seconds, times.batch_ms, times.tokens_per_second / 1e6,
      times.rows_per_second / 1e6, 1e6 / times.rows_per_second);
  fmt::print(
      "       = {:.0f}x the issue's d20 GPU ({:.0f}K tokens/s), {:.0f}x a d20 H100 (~{:.0f}K tokens/s)\n",
      times.tokens_per_second / kD20TokensPerSecondIssue, kD20TokensPerSecondIssue / 1e3,
      times.tokens_per_second / kD20TokensPerSecondH100, kD20TokensPerSecondH100 / 1e3);
  fmt::print(
      "paced at {:.3f} ms/batch: {} of {} batches waited (after the first), {:.3f} ms in all, max {:.3f} "
      "ms\n",
      times.step_ms, waits.waited_batches, waits.batches - 1, 1e3 * waits.total_wait_seconds,
      1e3 * waits.max_wait_seconds);
  fmt::print(
      "packing: {} rows, {:.2f} documents per row, crop fraction {:.4f} (tokens of used documents "
      "discarded), "
      "epoch {}\n",
      state.stats.rows,
      static_cast<double>(state.stats.docs_whole + state.stats.docs_cropped) /
          static_cast<double>(std::max<int64_t>(state.stats.rows, 1)),
      state.stats.crop_fraction(), state.epoch());
  fmt::print(
      "{{\"bench\": \"loader\", \"tokens_per_s\": {:.1f}, \"global_rows_per_s\": {:.1f}, \"batch_ms\": "
      "{:.4f}, "
      "\"first_batch_ms\": {:.3f}, \"paced_step_ms\": {:.4f}, \"paced_batches\": {}, "
      "\"paced_waited_batches\": {}, "
      "\"paced_wait_ms\": {:.4f}, \"crop_fraction\": {:.5f}, \"batch\": {}, \"seq\": {}, \"world_size\": {}, "
      "\"rank\": {}, \"doc_buffer\": {}, \"batches\": {}, \"shards\": {}, \"documents\": {}, \"tokens\": {}, "
      "\"synthetic\": {}, \"open_s\": {:.4f}, \"verified\": {}, \"x_d20_gpu_20k\": {:.1f}, \"version\": "
      "\"{}\", "
      "\"commit\": \"{}\"}}\n",
      times.tokens_per_second, times.rows_per_second, times.batch_ms, 1e3 * times.first_batch_seconds,
      times.step_ms, waits.batches - 1, waits.waited_batches, 1e3 * waits.total_wait_seconds,
      state.stats.crop_fraction(), options.batch_rows, options.sequence_length, options.world_size,
      options.rank, options.doc_buffer_size, times.drained, data.shard_count(), data.doc_count(),
      data.token_count(), bench.synthetic, bench.open_seconds, bench.verified,
      times.tokens_per_second / kD20TokensPerSecondIssue, version(), git_commit());
}

absl::Status run_bench_loader(const std::vector<std::string>& /*arguments*/) {
  LoaderOptions options;
  options.batch_rows = absl::GetFlag(FLAGS_batch);
  options.sequence_length = absl::GetFlag(FLAGS_seq);
  options.world_size = absl::GetFlag(FLAGS_world_size);
  options.rank = absl::GetFlag(FLAGS_rank);
  options.seed = absl::GetFlag(FLAGS_data_seed);
  options.doc_buffer_size = absl::GetFlag(FLAGS_doc_buffer);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const bool steps_given = flag_given("steps");
  if (steps_given && steps < 1) return absl::InvalidArgumentError("--steps must be >= 1");
  NANOFORGE_ASSIGN_OR_RETURN(const BenchData bench, open_bench_data());
  NANOFORGE_ASSIGN_OR_RETURN(
      const LoaderTimes times,
      time_loader(bench.shards, options, steps_given ? std::optional<int64_t>(steps) : std::nullopt));
  print_loader_report(options, bench, times);
  return absl::OkStatus();
}

}  // namespace

Command bench_loader_command() {
  return {"bench loader",
          "time the data loader: tokens/s one rank receives, waits, packing waste (last line: JSON)",
          "[--data DIR|FILES] --batch B --seq T [--world-size W --rank R] [--steps N] [--data-seed S]\n"
          "    (without --steps, or with its default 10: as many batches as fit in 3 s; without --data: "
          "synthetic shards)",
          {"data", "split", "batch", "seq", "world_size", "rank", "steps", "data_seed", "doc_buffer",
           "verify", "step_ms", "bin_vocab", "bin_bos_id", "synthetic_tokens", "doc_tokens_median",
           "doc_tokens_sigma", "doc_lengths"},
          run_bench_loader};
}

}  // namespace nanoforge
