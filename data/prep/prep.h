// `nanoforge prep`: raw documents to token shards. Documents are read in order, tokenized in parallel on all
// cores in chunks (BOS before each, nanochat's encode_ordinary), and appended in reading order to shards of
// about `shard_tokens` tokens: the first `val_docs` documents to val_NNNNN.h5, the rest to train_NNNNN.h5.
// Output is deterministic (same input, same tokenizer: same shards whatever the thread count). Each shard
// appears under its final name only once complete (data/shards/shard_writer.h) and is then recorded in
// prep.unfinished; manifest.txt is published last (data/shards/shard_manifest.h). A prep killed or stopped
// mid-way continues with `resume` from its last recorded shard, giving the shards of an uninterrupted run.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/documents/documents.h"
#include "data/tokenizer/tokenizer.h"

namespace nanoforge {

struct PrepOptions {
  std::vector<std::string> inputs;  // files, directories, globs or "-" (data/documents/documents.h)
  DocumentReadOptions documents;    // how text files split, the parquet text column, reading threads
  std::string out_dir;
  int64_t shard_tokens = 100'000'000;  // a shard is closed once it holds at least this many tokens
  int64_t val_docs = 1000;             // the first documents go to the validation split
  // out_dir may hold nothing but prep's own files (anything else is refused before any work: a run would
  // mix other shard files with prep's). It may hold an earlier prep's only with this set: then they
  // (train_NNNNN.h5, val_NNNNN.h5, unfinished .partial files, the manifest) are deleted before anything is
  // written.
  bool overwrite = false;
  // Continue the prep recorded in out_dir/prep.unfinished (same inputs, tokenizer and settings, checked):
  // shards after its last recorded one are deleted and written again. A finished prep is left as it is.
  bool resume = false;
  std::string command_line;  // recorded in the manifest
  // Asked between documents; true stops the prep with the shards so far recorded, resumable (a signal).
  std::function<bool()> stop_requested;
};

struct PrepProgress {
  int64_t documents = 0;
  int64_t tokens = 0;
  uint64_t bytes_read = 0, total_bytes = 0;
  double seconds = 0;
};

struct PrepResult {
  int64_t train_docs = 0, val_docs = 0;
  int64_t empty_docs = 0;                   // skipped
  std::vector<std::string> removed_shards;  // by overwrite
  int64_t train_tokens = 0, val_tokens = 0;
  uint64_t text_bytes = 0;          // UTF-8 bytes of all documents' text
  uint64_t input_bytes = 0;         // bytes of the input files (compressed where compressed)
  int64_t null_texts = 0;           // parquet rows without text (no document)
  std::vector<std::string> shards;  // in the order written (by this process)
  int64_t resumed_shards = 0;       // recorded by the interrupted prep and kept
  bool already_complete = false;    // resume found the manifest: nothing was done
  double seconds = 0;
};

// `progress` is called after every chunk (from the calling thread). A stop asked for by
// options.stop_requested returns Cancelled, naming what is recorded and how to continue.
absl::StatusOr<PrepResult> prep_shards(const Tokenizer& tokenizer, const PrepOptions& options,
                                       const std::function<void(const PrepProgress&)>& progress = {});

}  // namespace nanoforge
