// The first half of BPE training: read documents, split them into pieces with the tokenizer's regex and
// count each distinct piece, on all cores. One thread reads documents into ~1 MiB batches; worker threads
// split and count into their own hash maps, which are added together at the end. Document selection follows
// nanochat's scripts/tok_train.py: each document is cut to its first doc_max_chars characters, and reading
// stops after the document that takes the total past max_chars.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/documents/documents.h"
#include "data/tokenizer/bpe_split.h"

namespace nanoforge {

struct PieceCountProgress {
  int64_t documents = 0;
  int64_t chars = 0;  // characters (UTF-8 code points) taken, after cutting documents
  uint64_t file_bytes_read = 0;
  uint64_t file_bytes_total = 0;
  int64_t max_chars = 0;  // the limit, 0 for none
  double seconds = 0;
  bool finished = false;  // the last call, after all documents are counted
};

struct PieceCountOptions {
  int64_t max_chars = 0;          // stop after this many characters (0: read everything)
  int64_t doc_max_chars = 10000;  // cut each document to this many characters (0: no cut); nanochat's doc_cap
  int threads = 0;                // counting threads (0: all cores)
  // Called from the reading thread about once a second, and once at the end.
  std::function<void(const PieceCountProgress&)> progress;
};

struct PieceCounts {
  std::vector<std::string> pieces;  // distinct pieces, in no particular order
  std::vector<int64_t> counts;      // occurrences of pieces[i]
  int64_t documents = 0;
  int64_t chars = 0;
  int64_t bytes = 0;  // UTF-8 bytes of the text taken
  int64_t total_pieces = 0;
};

// Characters are UTF-8 code points (Python's len of the str), counted as bytes that are not continuation
// bytes; the cut never splits a character.
std::string_view first_chars(std::string_view text, int64_t max_chars, int64_t& chars_taken);

absl::StatusOr<PieceCounts> count_pieces(DocumentReader& reader, const PieceSplitter& splitter,
                                         const PieceCountOptions& options);

}  // namespace nanoforge
