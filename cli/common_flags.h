// Flags shared by several commands, defined once in common_flags.cpp (absl flags are process-wide).
#pragma once

#include <absl/flags/declare.h>
#include <absl/status/statusor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/documents/documents.h"
#include "kernels/tensor.h"

ABSL_DECLARE_FLAG(int32_t, threads);
// Input documents (data/documents/documents.h): files or directories, comma-separated; and how text files
// split.
ABSL_DECLARE_FLAG(std::vector<std::string>, input);
ABSL_DECLARE_FLAG(std::string, text_split);
ABSL_DECLARE_FLAG(std::string, text_column);
// A tokenizer directory (data/tokenizer/tokenizer.h).
ABSL_DECLARE_FLAG(std::string, tokenizer);
ABSL_DECLARE_FLAG(std::string, out);
// Whether --out may hold the command's earlier output (shards, a tokenizer), which it then replaces.
ABSL_DECLARE_FLAG(bool, overwrite);
// Continue an interrupted train (its run directory) or prep (its --out): the help text is train's, and prep
// gives its own (Command::flag_help).
ABSL_DECLARE_FLAG(bool, resume);
ABSL_DECLARE_FLAG(std::string, data);
ABSL_DECLARE_FLAG(std::string, checkpoint);
// The backend a command runs on: "cpu" or "cuda".
ABSL_DECLARE_FLAG(std::string, device);
// A training recipe (train, bench scaling).
ABSL_DECLARE_FLAG(std::string, recipe);
namespace nanoforge {
// --text-split, --text-column and --threads (parquet row groups read at once) as the reader's options.
absl::StatusOr<DocumentReadOptions> document_read_options_from_flags();
// --device as a Device: cpu, or cuda when a GPU is usable (an error saying why otherwise).
absl::StatusOr<Device> device_from_flag();
// Whether the flag named `name` (underscores, as defined) holds other than its default: how a command tells
// a flag given for nothing (this absl keeps "given on the command line" private).
bool flag_given(const char* name);
// A directory flag's value, or where it is not given, `default_dir()` (support/base_dir.h: under
// $NANOFORGE_BASE_DIR); an error naming the flag when there is no default either.
absl::StatusOr<std::string> directory_or_default(const char* flag, const std::string& value,
                                                 absl::StatusOr<std::string> (*default_dir)());
// Whether `out` and `input` name the same existing file (by any path): a command must not write its output
// over what it reads.
bool same_existing_file(const std::string& out, const std::string& input);
// Prints a benchmark's closing JSON record and also writes it to --json-out when that is set.
absl::Status print_json_record(const std::string& json);
}  // namespace nanoforge
// Benchmarks: where to write the JSON record they print last.
ABSL_DECLARE_FLAG(std::string, json_out);
