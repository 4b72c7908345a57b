// Flags shared by several commands (absl flags are process-wide, so each is defined once, here).
#include "cli/common_flags.h"
#include "cli/flag_limits.h"

#include <absl/flags/commandlineflag.h>
#include <absl/flags/flag.h>
#include <absl/flags/reflection.h>
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "support/output_path.h"
#include "support/status.h"

ABSL_FLAG(int32_t, threads, 0,
          "CPU threads for the ops and BLAS (0: OpenMP's default, OMP_NUM_THREADS or all cores)");
NANOFORGE_FLAG_LIMIT(threads, 0, 1024, "(0: all cores)");
ABSL_FLAG(
    bool, overwrite, false,
    "--out may hold this command's earlier output: replace it (prep deletes its train_*.h5 and val_*.h5 "
    "first; tokenizer train replaces the tokenizer files); without it that is refused");
ABSL_FLAG(bool, resume, false, "continue the interrupted run in --run-dir from its newest valid checkpoint");
ABSL_FLAG(std::vector<std::string>, input, {},
          "input documents, comma-separated: *.jsonl/*.ndjson (\"text\" field), *.txt/*.text/*.md, any of "
          "them as .gz or .zst, *.parquet (--text-column), directories of them (sorted by name), glob "
          "patterns ('data/shard_*.parquet'), or - (JSON lines on standard input)");
ABSL_FLAG(std::string, text_split, "paragraphs",
          "documents of text files: 'paragraphs' (separated by blank lines) or 'file' (one per file)");
ABSL_FLAG(std::string, text_column, "text", "the parquet column that holds the documents' text");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer directory (tokenizer.tiktoken + special_tokens.txt)");
ABSL_FLAG(std::string, out, "", "where to write the command's output (a file or a directory, see the usage)");
ABSL_FLAG(std::string, data, "", "token shards: a directory of shard files, or comma-separated files");
ABSL_FLAG(std::string, device, "cpu",
          "backend: cpu (fp32) or cuda (bf16 activations, fp32 weights and gradients)");
ABSL_FLAG(std::string, json_out, "", "also write the final JSON record to this file (rank 0 only)");
ABSL_FLAG(std::string, checkpoint, "", "a checkpoint directory, or a run directory (its latest checkpoint)");
ABSL_FLAG(std::string, recipe, "", "recipe file (TOML; see recipes/ and docs/training.md)");

namespace nanoforge {

absl::StatusOr<DocumentReadOptions> document_read_options_from_flags() {
  DocumentReadOptions options;
  NANOFORGE_ASSIGN_OR_RETURN(options.text_split, parse_text_split(absl::GetFlag(FLAGS_text_split)));
  options.text_column = absl::GetFlag(FLAGS_text_column);
  if (options.text_column.empty()) return absl::InvalidArgumentError("--text-column must name a column");
  options.threads = absl::GetFlag(FLAGS_threads);
  return options;
}

absl::StatusOr<Device> device_from_flag() {
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device == "cpu") return Device::kCpu;
  if (device != "cuda")
    return absl::InvalidArgumentError(fmt::format("--device {}: use cpu or cuda", device));
  std::string reason;
  if (!gpu_available(&reason)) {
    return absl::FailedPreconditionError(fmt::format("--device cuda: no usable GPU: {}", reason));
  }
  return Device::kCuda;
}

bool flag_given(const char* name) {
  const absl::CommandLineFlag* found = absl::FindCommandLineFlag(name);
  return found != nullptr && found->CurrentValue() != found->DefaultValue();
}

absl::StatusOr<std::string> directory_or_default(const char* flag, const std::string& value,
                                                 absl::StatusOr<std::string> (*default_dir)()) {
  if (!value.empty()) return value;
  absl::StatusOr<std::string> directory = default_dir();
  if (!directory.ok()) {
    return absl::Status(directory.status().code(),
                        fmt::format("no {} given, and {}", flag, std::string(directory.status().message())));
  }
  return directory;
}

bool same_existing_file(const std::string& out, const std::string& input) {
  std::error_code error;
  return std::filesystem::equivalent(out, input, error) && !error;
}

absl::Status print_json_record(const std::string& json) {
  fmt::print("{}\n", json);
  const std::string out = absl::GetFlag(FLAGS_json_out);
  if (out.empty()) return absl::OkStatus();
  if (absl::Status written = write_file_atomically(out, json + "\n"); !written.ok()) {
    return absl::Status(written.code(), "--json-out: " + std::string(written.message()));
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
