// Input documents for tokenizer training and `nanoforge prep`: a streaming reader over a list of files that
// yields one document at a time, never holding more than one file's current line (or one whole text file in
// whole-file mode, or a few parquet row groups) in memory.
//   *.jsonl, *.ndjson   one JSON object per line, the document is its "text" string field (simdjson parses
//                       and validates it, UTF-8 included); blank lines are skipped.
//   *.txt, *.text, *.md plain text: by default a document is a paragraph, i.e. a run of lines separated from
//                       the next by one or more blank lines (lines of only spaces, tabs or '\r'); its text is
//                       the lines exactly as in the file, without the last line's terminator. With
//                       TextSplit::kWholeFile a document is the whole file, byte for byte.
//   any of these + .gz or .zst   the same, decompressed on the fly (data/documents/byte_source.h)
//   *.parquet           one document per row of a string column (data/documents/parquet_documents.h)
//   -                   standard input, JSON lines (gzip or zstd compressed ones are recognised)
// Errors name the file and line (the row group for parquet).
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nanoforge {

enum class TextSplit { kParagraphs, kWholeFile };
// "paragraphs" or "file".
absl::StatusOr<TextSplit> parse_text_split(std::string_view name);

// Each input is a file of a known kind, a directory (its files of known kinds, not recursive, sorted by
// name), a glob pattern (*, ? or [...]; its matches of known kinds, sorted), or "-" (standard input, once).
// A file named twice is read once, at its first place ("val.parquet,dir" reads val.parquet first, then the
// rest of dir). Missing paths, unknown kinds and directories or patterns without documents are errors.
absl::StatusOr<std::vector<std::string>> expand_document_paths(const std::vector<std::string>& inputs);

struct Document {
  std::string text;
  size_t file_index = 0;  // into DocumentReader::paths()
  int64_t line = 0;       // the 1-based line the document starts on (its row, in a parquet file)
};

struct DocumentReadOptions {
  TextSplit text_split = TextSplit::kParagraphs;
  std::string text_column = "text";  // parquet: the column holding the documents
  int threads = 0;                   // parquet: row groups decoded at once (0: all cores)
};

class DocumentReader {
 public:
  // `paths` are files (see expand_document_paths); each must exist with a known extension.
  static absl::StatusOr<DocumentReader> open(std::vector<std::string> paths,
                                             TextSplit text_split = TextSplit::kParagraphs);
  static absl::StatusOr<DocumentReader> open(std::vector<std::string> paths,
                                             const DocumentReadOptions& options);

  DocumentReader(DocumentReader&&) noexcept;
  DocumentReader& operator=(DocumentReader&&) noexcept;
  ~DocumentReader();

  // Fills `document` and returns true; false after the last document of the last file; or an error that
  // names the file and line.
  absl::StatusOr<bool> next(Document& document);

  const std::vector<std::string>& paths() const;
  uint64_t total_bytes() const;  // the sizes of all files (standard input: 0), for progress and ETA
  uint64_t bytes_read() const;   // bytes of the files consumed so far (compressed bytes where compressed)
  int64_t null_texts() const;    // parquet rows skipped so far because their text is null

 private:
  struct State;
  explicit DocumentReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace nanoforge
