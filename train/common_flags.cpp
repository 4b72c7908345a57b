// Flags shared by several commands (absl flags are process-wide, so each is defined once, here).
#include "train/common_flags.h"

#include <absl/flags/flag.h>

#include <string>
#include <vector>

ABSL_FLAG(int32_t, threads, 0,
          "CPU threads for the ops and BLAS (0: OpenMP's default, OMP_NUM_THREADS or all cores)");
ABSL_FLAG(std::vector<std::string>, input, {},
          "input documents, comma-separated: *.jsonl/*.ndjson (\"text\" field), *.txt/*.text/*.md, or "
          "directories of them (sorted by name)");
ABSL_FLAG(std::string, text_split, "paragraphs",
          "documents of text files: 'paragraphs' (separated by blank lines) or 'file' (one per file)");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer directory (tokenizer.tiktoken + special_tokens.txt)");
ABSL_FLAG(std::string, out, "", "where to write the command's output (a file or a directory, see the usage)");
ABSL_FLAG(std::string, data, "", "token shards: a directory of shard files, or comma-separated files");
ABSL_FLAG(std::string, checkpoint, "", "a checkpoint directory, or a run directory (its latest checkpoint)");
