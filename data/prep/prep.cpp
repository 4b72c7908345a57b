// prep_shards: read a chunk of documents, encode them in parallel, append them in order to the open shard.
#include "data/prep/prep.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>

#include "data/shards/shard_writer.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr int64_t kChunkDocuments = 4096;      // documents encoded per parallel round
constexpr uint64_t kChunkBytes = 32ull << 20;  // ... or fewer, once they hold this much text

// The shard being filled for one split, opened on the first document.
class SplitWriter {
 public:
  SplitWriter(std::string split, const PrepOptions& options, ShardMetadata metadata, PrepResult& result)
      : split_(std::move(split)), options_(options), metadata_(std::move(metadata)), result_(result) {}

  absl::Status append(std::span<const int32_t> tokens) {
    if (!writer_) {
      const std::string path =
          (std::filesystem::path(options_.out_dir) / shard_file_name(split_, index_)).string();
      NANOFORGE_ASSIGN_OR_RETURN(ShardWriter writer, ShardWriter::create(path, metadata_));
      writer_.emplace(std::move(writer));
    }
    NANOFORGE_RETURN_IF_ERROR(writer_->append_document(tokens));
    if (writer_->token_count() >= options_.shard_tokens) return close();
    return absl::OkStatus();
  }

  absl::Status close() {
    if (!writer_) return absl::OkStatus();
    NANOFORGE_RETURN_IF_ERROR(writer_->finish());
    result_.shards.push_back(writer_->path());
    writer_.reset();
    ++index_;
    return absl::OkStatus();
  }

 private:
  std::string split_;
  const PrepOptions& options_;
  ShardMetadata metadata_;
  PrepResult& result_;
  std::optional<ShardWriter> writer_;
  int64_t index_ = 0;
};

// Shard files already in out_dir: refused, or with `overwrite` prep's own deleted (and returned).
absl::StatusOr<std::vector<std::string>> clear_output_directory(const PrepOptions& options) {
  namespace fs = std::filesystem;
  static const std::regex kOwn(R"((train|val)_[0-9]{5,}\.h5(\.partial-[0-9]+)?)");
  std::vector<fs::path> own, foreign;
  std::error_code error;
  for (fs::directory_iterator entry(options.out_dir, error), end; !error && entry != end;
       entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    const std::string extension = entry->path().extension().string();
    if (std::regex_match(name, kOwn)) {
      own.push_back(entry->path());
    } else if (extension == ".h5" || extension == ".bin") {
      foreign.push_back(entry->path());
    }
  }
  if (!foreign.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "--out {} holds other shard files ({}{}) that a run would mix with prep's: use an empty or new "
        "directory",
        options.out_dir, foreign.front().filename().string(), foreign.size() > 1 ? ", ..." : ""));
  }
  if (own.empty()) return std::vector<std::string>{};
  if (!options.overwrite) {
    std::sort(own.begin(), own.end());
    return absl::AlreadyExistsError(
        fmt::format("--out {} already holds {} shard file{} ({}{}): give an empty or new directory, or add "
                    "--overwrite to "
                    "delete them first (a new prep may write fewer shards, and stale ones would be mixed in)",
                    options.out_dir, own.size(), own.size() == 1 ? "" : "s", own.front().filename().string(),
                    own.size() > 1 ? ", ..." : ""));
  }
  std::vector<std::string> removed;
  for (const fs::path& path : own) {
    fs::remove(path, error);
    if (error) {
      return absl::PermissionDeniedError(
          fmt::format("--overwrite: cannot delete {}: {}", path.string(), error.message()));
    }
    removed.push_back(path.filename().string());
  }
  return removed;
}

}  // namespace

absl::StatusOr<PrepResult> prep_shards(const Tokenizer& tokenizer, const PrepOptions& options,
                                       const std::function<void(const PrepProgress&)>& progress) {
  if (options.shard_tokens < 1) return absl::InvalidArgumentError("--shard-tokens must be >= 1");
  if (options.val_docs < 0) return absl::InvalidArgumentError("--val-docs must be >= 0");
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_document_paths(options.inputs));
  NANOFORGE_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::open(paths, options.documents));
  PrepResult result;
  NANOFORGE_ASSIGN_OR_RETURN(result.removed_shards, clear_output_directory(options));
  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error)
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create: {}", options.out_dir, error.message()));

  const ShardMetadata metadata{tokenizer.vocab_size(), tokenizer.bos_id(), tokenizer.hash()};
  SplitWriter val("val", options, metadata, result), train("train", options, metadata, result);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Document> chunk;
  std::vector<std::vector<int32_t>> encoded;
  int64_t documents = 0;
  for (bool more = true; more;) {
    chunk.clear();
    uint64_t chunk_bytes = 0;
    while (static_cast<int64_t>(chunk.size()) < kChunkDocuments && chunk_bytes < kChunkBytes) {
      Document document;
      NANOFORGE_ASSIGN_OR_RETURN(more, reader.next(document));
      if (!more) break;
      chunk_bytes += document.text.size();
      chunk.push_back(std::move(document));
    }
    encoded.resize(chunk.size());
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < static_cast<int64_t>(chunk.size()); ++i) {
      encoded[i].clear();
      tokenizer.encode(chunk[i].text, encoded[i]);
    }
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (encoded[i].empty()) {
        ++result.empty_docs;
        continue;
      }
      const bool to_val = documents++ < options.val_docs;
      absl::Status status = (to_val ? val : train).append(encoded[i]);
      if (!status.ok()) {
        return absl::Status(status.code(), fmt::format("{} line {}: {}", reader.paths()[chunk[i].file_index],
                                                       chunk[i].line, std::string(status.message())));
      }
      (to_val ? result.val_docs : result.train_docs) += 1;
      result.text_bytes += chunk[i].text.size();
      (to_val ? result.val_tokens : result.train_tokens) += static_cast<int64_t>(encoded[i].size()) + 1;
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) {
      progress({documents, result.train_tokens + result.val_tokens, reader.bytes_read(), reader.total_bytes(),
                result.seconds});
    }
  }
  if (documents == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "no documents{} in {}", result.empty_docs > 0 ? " with text" : "", fmt::join(options.inputs, ", ")));
  }
  if (result.train_docs == 0) {
    return absl::InvalidArgumentError(
        fmt::format("all {} documents went to validation (--val-docs {}): lower --val-docs to leave "
                    "documents to train on",
                    documents, options.val_docs));
  }
  NANOFORGE_RETURN_IF_ERROR(val.close());
  NANOFORGE_RETURN_IF_ERROR(train.close());
  result.input_bytes = reader.bytes_read();
  result.null_texts = reader.null_texts();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace nanoforge
