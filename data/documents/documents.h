// Input documents for tokenizer training and `nanoforge prep`: a streaming reader over a list of files that
// yields one document at a time, never holding more than one file's current line (or one whole text file in
// whole-file mode, or a few parquet row groups) in memory. JSON lines, text (paragraphs or whole files), any
// of these gzip- or zstd-compressed (byte_source.h), parquet (parquet_documents.h) and standard input;
// docs/data.md (Input documents) says what a document is in each. Errors name the file and line (the row
// group for parquet).
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
