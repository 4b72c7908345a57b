// ParquetTextReader on Arrow's parquet::arrow::FileReader. Each worker thread has its own FileReader on the
// file (sharing the footer read once) and decodes whole row groups of the one text column; the reading thread
// takes them in row-group order. At most 2 x threads row groups, and about kInFlightBytes of their column's
// uncompressed bytes, are held at once. Page checksums are verified where the writer stored them.
#include <arrow/array.h>
#include <arrow/chunked_array.h>
#include <arrow/memory_pool.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <fmt/format.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "data/documents/parquet_documents.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr uint64_t kInFlightBytes = 512ull << 20;

bool is_text_type(arrow::Type::type type) {
  return type == arrow::Type::STRING || type == arrow::Type::LARGE_STRING || type == arrow::Type::STRING_VIEW;
}

// The text of row `i` of a chunk of one of the string types is_text_type accepts.
std::string_view text_at(const arrow::Array& array, int64_t i) {
  switch (array.type_id()) {
    case arrow::Type::STRING:
      return static_cast<const arrow::StringArray&>(array).GetView(i);
    case arrow::Type::LARGE_STRING:
      return static_cast<const arrow::LargeStringArray&>(array).GetView(i);
    default:
      return static_cast<const arrow::StringViewArray&>(array).GetView(i);
  }
}

struct RowGroup {
  int64_t first_row = 0, rows = 0;
  uint64_t file_bytes = 0;    // compressed, all columns: progress
  uint64_t column_bytes = 0;  // uncompressed, the text column: memory held while in flight
};

struct DecodedRowGroup {
  absl::Status status;
  std::shared_ptr<arrow::ChunkedArray> texts;
};

parquet::ReaderProperties reader_properties() {
  parquet::ReaderProperties properties = parquet::default_reader_properties();
  properties.set_page_checksum_verification(true);
  return properties;
}

class ArrowParquetTextReader final : public ParquetTextReader {
 public:
  ArrowParquetTextReader(std::string path, std::shared_ptr<parquet::FileMetaData> metadata, int column,
                         std::vector<RowGroup> row_groups, uint64_t file_bytes, int threads)
      : path_(std::move(path)),
        metadata_(std::move(metadata)),
        column_(column),
        row_groups_(std::move(row_groups)),
        file_bytes_(file_bytes),
        window_(2 * threads) {
    for (int t = 0; t < threads; ++t)
      workers_.emplace_back([this] { decode_row_groups(); });
  }
  ~ArrowParquetTextReader() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& worker : workers_)
      worker.join();
  }
  ArrowParquetTextReader(const ArrowParquetTextReader&) = delete;
  ArrowParquetTextReader& operator=(const ArrowParquetTextReader&) = delete;

  absl::StatusOr<bool> next(std::string& text, int64_t& row) override {
    while (true) {
      if (texts_ != nullptr) {
        while (chunk_ < texts_->num_chunks()) {
          const arrow::Array& chunk = *texts_->chunk(chunk_);
          while (index_ < chunk.length()) {
            const int64_t i = index_++;
            ++row_in_group_;
            if (chunk.IsNull(i)) {
              ++null_texts_;
              continue;
            }
            const std::string_view value = text_at(chunk, i);
            text.assign(value.data(), value.size());
            row = row_groups_[current_].first_row + row_in_group_;
            return true;
          }
          ++chunk_;
          index_ = 0;
        }
        release_current();
      }
      if (current_ >= static_cast<int>(row_groups_.size())) {
        bytes_read_ = file_bytes_;
        return false;
      }
      NANOFORGE_RETURN_IF_ERROR(take_current());
    }
  }
  uint64_t bytes_read() const override { return bytes_read_; }
  int64_t null_texts() const override { return null_texts_; }

 private:
  // Waits for row group current_ and makes it the one next() walks; its error if it failed.
  absl::Status take_current() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return decoded_.count(current_) > 0; });
    DecodedRowGroup& decoded = decoded_[current_];
    if (!decoded.status.ok()) return decoded.status;
    texts_ = std::move(decoded.texts);
    chunk_ = 0;
    index_ = 0;
    row_in_group_ = 0;
    return absl::OkStatus();
  }

  void release_current() {
    {
      std::lock_guard lock(mutex_);
      decoded_.erase(current_);
      in_flight_bytes_ -= row_groups_[current_].column_bytes;
      ++current_;
    }
    changed_.notify_all();
    texts_.reset();
    bytes_read_ += row_groups_[current_ - 1].file_bytes;
  }

  // A worker: takes the next row group in order while the window has room, decodes it, posts it.
  void decode_row_groups() {
    std::unique_ptr<parquet::arrow::FileReader> reader;
    while (true) {
      int group = 0;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] {
          if (stop_ || next_to_decode_ >= static_cast<int>(row_groups_.size())) return true;
          if (next_to_decode_ == current_) return true;  // the reading thread waits for this one
          return next_to_decode_ - current_ < window_ && in_flight_bytes_ < kInFlightBytes;
        });
        if (stop_ || next_to_decode_ >= static_cast<int>(row_groups_.size())) return;
        group = next_to_decode_++;
        in_flight_bytes_ += row_groups_[group].column_bytes;
      }
      DecodedRowGroup decoded = decode(reader, group);
      {
        std::lock_guard lock(mutex_);
        decoded_[group] = std::move(decoded);
      }
      changed_.notify_all();
    }
  }

  DecodedRowGroup decode(std::unique_ptr<parquet::arrow::FileReader>& reader, int group) {
    const RowGroup& g = row_groups_[group];
    auto failed = [&](const std::string& why) {
      return DecodedRowGroup{
          absl::DataLossError(fmt::format("{}: row group {} of {} (numbered from 0; rows {}..{}) cannot be "
                                          "read: {}. The file is corrupt or truncated: "
                                          "download or copy it again",
                                          path_, group, row_groups_.size(), g.first_row + 1,
                                          g.first_row + g.rows, why)),
          nullptr};
    };
    try {
      if (reader == nullptr) {
        parquet::ArrowReaderProperties arrow_properties;
        arrow_properties.set_use_threads(false);  // the row groups are the parallelism
        auto made = parquet::arrow::FileReader::Make(
            arrow::default_memory_pool(),
            parquet::ParquetFileReader::OpenFile(path_, false, reader_properties(), metadata_),
            arrow_properties);
        if (!made.ok()) return failed(made.status().ToString());
        reader = std::move(*made);
      }
      auto table = reader->ReadRowGroup(group, {column_});
      if (!table.ok()) return failed(table.status().ToString());
      if ((*table)->num_rows() != g.rows) {
        return failed(fmt::format("it holds {} rows, the footer says {}", (*table)->num_rows(), g.rows));
      }
      return DecodedRowGroup{absl::OkStatus(), (*table)->column(0)};
    } catch (const std::exception& error) {  // parquet:: reports some errors by exception
      return failed(error.what());
    }
  }

  const std::string path_;
  const std::shared_ptr<parquet::FileMetaData> metadata_;
  const int column_;
  const std::vector<RowGroup> row_groups_;
  const uint64_t file_bytes_;
  const int window_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, DecodedRowGroup> decoded_;  // decoded and not yet taken, by row group
  int next_to_decode_ = 0;
  int current_ = 0;  // the row group the reading thread is on
  uint64_t in_flight_bytes_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;

  // The reading thread's own state.
  std::shared_ptr<arrow::ChunkedArray> texts_;
  int chunk_ = 0;
  int64_t index_ = 0, row_in_group_ = 0;
  uint64_t bytes_read_ = 0;
  int64_t null_texts_ = 0;
};

}  // namespace

bool parquet_supported() {
  return true;
}

absl::StatusOr<std::unique_ptr<ParquetTextReader>> open_parquet_text(const std::string& path,
                                                                     const ParquetReadOptions& options) {
  std::shared_ptr<parquet::FileMetaData> metadata;
  std::shared_ptr<arrow::Schema> schema;
  int column = -1;
  try {
    auto made = parquet::arrow::FileReader::Make(
        arrow::default_memory_pool(), parquet::ParquetFileReader::OpenFile(path, false, reader_properties()));
    if (!made.ok()) throw parquet::ParquetException(made.status().ToString());
    metadata = (*made)->parquet_reader()->metadata();
    const arrow::Status got_schema = (*made)->GetSchema(&schema);
    if (!got_schema.ok()) throw parquet::ParquetException(got_schema.ToString());
    const int field = schema->GetFieldIndex(options.text_column);
    if (field >= 0) column = (*made)->manifest().schema_fields[field].column_index;
  } catch (const std::exception& error) {
    return absl::DataLossError(fmt::format(
        "{}: not a readable parquet file: {} (a truncated copy has lost the footer at the end of the "
        "file: download or copy it again)",
        path, error.what()));
  }
  const int field = schema->GetFieldIndex(options.text_column);
  if (field < 0) {
    std::vector<std::string> names;
    for (const auto& f : schema->fields())
      names.push_back(f->name());
    return absl::InvalidArgumentError(fmt::format(
        "{}: no column '{}' (the columns are: {}); --text-column NAME picks the one holding the text", path,
        options.text_column, fmt::join(names, ", ")));
  }
  const auto& type = *schema->field(field)->type();
  if (!is_text_type(type.id()) || column < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: column '{}' holds {}, not strings; --text-column NAME picks the one holding the text", path,
        options.text_column, type.ToString()));
  }
  std::vector<RowGroup> row_groups(metadata->num_row_groups());
  int64_t first_row = 0;
  for (int g = 0; g < metadata->num_row_groups(); ++g) {
    // A row group's metadata is decoded (and validated, by exception) only when asked for.
    try {
      const auto group = metadata->RowGroup(g);
      RowGroup& r = row_groups[g];
      r.first_row = first_row;
      r.rows = group->num_rows();
      if (r.rows < 0 || __builtin_add_overflow(first_row, r.rows, &first_row))
        throw parquet::ParquetException(fmt::format("{} rows", r.rows));
      for (int c = 0; c < group->num_columns(); ++c)
        r.file_bytes +=
            static_cast<uint64_t>(std::max<int64_t>(0, group->ColumnChunk(c)->total_compressed_size()));
      r.column_bytes =
          static_cast<uint64_t>(std::max<int64_t>(0, group->ColumnChunk(column)->total_uncompressed_size()));
    } catch (const std::exception& error) {
      return absl::DataLossError(fmt::format("{}: row group {} of {}: damaged metadata: {} (corrupt file)",
                                             path, g + 1, metadata->num_row_groups(), error.what()));
    }
  }
  std::error_code error;
  const uint64_t file_bytes = std::filesystem::file_size(path, error);
  const int threads = std::clamp(
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency()), 1,
      std::max(1, metadata->num_row_groups()));
  return std::make_unique<ArrowParquetTextReader>(path, std::move(metadata), column, std::move(row_groups),
                                                  error ? 0 : file_bytes, threads);
}

}  // namespace nanoforge
