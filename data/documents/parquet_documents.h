// Parquet input (nanochat's base_data shards, Hugging Face datasets): the documents are one string column
// (`text` by default) read through Apache Arrow's own parquet reader, never a parser of ours. Row groups are
// decoded on worker threads, several at once, and handed out strictly in file order, so what a reader
// returns does not depend on the thread count. A null text is no document (it is counted). Arrow is an
// optional dependency (cmake/Arrow.cmake): built without it, opening a parquet file is refused with how to
// get it (parquet_documents_unavailable.cpp).
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <string>

namespace nanoforge {

struct ParquetReadOptions {
  std::string text_column = "text";
  int threads = 0;  // row groups decoded at once (0: all cores)
};

class ParquetTextReader {
 public:
  virtual ~ParquetTextReader() = default;
  // The next non-null text and its 1-based row in the file; false after the last row. Errors name the file
  // and the row group that failed.
  virtual absl::StatusOr<bool> next(std::string& text, int64_t& row) = 0;
  virtual uint64_t bytes_read()
      const = 0;  // compressed bytes of the row groups handed out (the file's size at the end)
  virtual int64_t null_texts() const = 0;  // rows skipped because their text is null
};

// Reads the footer and checks the column (present, of a string type) before returning.
absl::StatusOr<std::unique_ptr<ParquetTextReader>> open_parquet_text(const std::string& path,
                                                                     const ParquetReadOptions& options);

// Whether this build reads parquet (false: open_parquet_text always refuses, saying how to get Arrow).
bool parquet_supported();

}  // namespace nanoforge
