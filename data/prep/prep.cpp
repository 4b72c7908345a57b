// prep_shards: take --out's lock, read a chunk of documents, encode (and hash) them in parallel, append them
// in order to the open shard; record each finished shard in prep.unfinished, and publish manifest.txt at the
// end. A resume re-reads the input up to the last recorded shard's last document, checks that it hashes as
// recorded (resume.h), and carries on from there.
#include "data/prep/prep.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>

#include "data/prep/prep_lock.h"
#include "data/prep/resume.h"
#include "data/shards/open_shard.h"
#include "data/shards/shard_manifest.h"
#include "data/shards/shard_writer.h"
#include "support/base_dir.h"
#include "support/fault_point.h"
#include "support/file_checksum.h"
#include "support/output_path.h"
#include "support/status.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kChunkDocuments = 4096;      // documents encoded per parallel round
constexpr uint64_t kChunkBytes = 32ull << 20;  // ... or fewer, once they hold this much text

// prep's own files in --out: shards, unfinished shard files, the journal and the manifest (which
// --overwrite and --resume delete); the lock besides.
const std::regex& own_file_pattern() {
  static const std::regex pattern(
      R"(((train|val)_[0-9]{5,}\.h5(\.partial-[0-9]+)?)|((manifest\.txt|prep\.unfinished)(\.tmp)?))");
  return pattern;
}

bool is_prep_file_name(const std::string& name) {
  return std::regex_match(name, own_file_pattern()) || name == PrepLock::kFileName;
}

// The fault point of a prep (support/fault_point.h): after_document@N (the N-th document appended by this
// process), after_shard@N (the N-th shard renamed into place, not yet recorded), after_record@N (... and
// recorded).
const absl::StatusOr<FaultPoint>& prep_fault() {
  static const absl::StatusOr<FaultPoint> fault =
      FaultPoint::from_environment("NANOFORGE_PREP_FAULT", {"after_document", "after_shard", "after_record"});
  return fault;
}

// Files of an earlier prep in out_dir: refused, or with `overwrite` deleted (and returned).
absl::StatusOr<std::vector<std::string>> clear_output_directory(const PrepOptions& options) {
  std::vector<fs::path> own;
  std::error_code error;
  bool unfinished = false;
  for (fs::directory_iterator entry(options.out_dir, error), end; !error && entry != end;
       entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (std::regex_match(name, own_file_pattern())) {
      own.push_back(entry->path());
      unfinished |= name == kPrepJournalName;
    }
  }
  if (own.empty()) return std::vector<std::string>{};
  if (!options.overwrite) {
    if (unfinished) {
      return absl::AlreadyExistsError(
          fmt::format("--out {} holds a prep that did not finish ({}): add --resume to continue it, or "
                      "--overwrite to start over",
                      options.out_dir, kPrepJournalName));
    }
    std::sort(own.begin(), own.end());
    return absl::AlreadyExistsError(fmt::format(
        "--out {} already holds {} file{} of a prep ({}{}): give an empty or new directory, or add "
        "--overwrite to delete them first (a new prep may write fewer shards, and stale ones would "
        "be mixed in)",
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

// A resume deletes prep's files that its record does not list (shards written after it, unfinished files).
void delete_unrecorded_files(const PrepOptions& options, const ShardManifest& record) {
  std::set<std::string> recorded;
  for (const ManifestShard& shard : record.shards)
    recorded.insert(shard.name);
  std::error_code error;
  for (fs::directory_iterator entry(options.out_dir, error), end; !error && entry != end;
       entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (std::regex_match(name, own_file_pattern()) && !recorded.count(name) && name != kPrepJournalName)
      fs::remove(entry->path(), error);
  }
}

// The shard being filled for one split, opened on the first document.
class SplitWriter {
 public:
  SplitWriter(std::string split, const PrepOptions& options, ShardMetadata metadata, int64_t first_index)
      : split_(std::move(split)), options_(options), metadata_(std::move(metadata)), index_(first_index) {}

  bool open() const { return writer_.has_value(); }

  // Appends a document; returns the finished shard's path when it filled the shard, else "".
  absl::StatusOr<std::string> append(std::span<const int32_t> tokens) {
    if (!writer_) {
      const std::string path = (fs::path(options_.out_dir) / shard_file_name(split_, index_)).string();
      NANOFORGE_ASSIGN_OR_RETURN(ShardWriter writer, ShardWriter::create(path, metadata_));
      writer_.emplace(std::move(writer));
    }
    NANOFORGE_RETURN_IF_ERROR(writer_->append_document(tokens));
    if (writer_->token_count() >= options_.shard_tokens) return close();
    return std::string();
  }

  // Finishes the open shard: its path, or "" when none was open.
  absl::StatusOr<std::string> close() {
    if (!writer_) return std::string();
    NANOFORGE_RETURN_IF_ERROR(writer_->finish());
    std::string path = writer_->path();
    writer_.reset();
    ++index_;
    return path;
  }

 private:
  std::string split_;
  const PrepOptions& options_;
  ShardMetadata metadata_;
  std::optional<ShardWriter> writer_;
  int64_t index_ = 0;
};

// The record's entry of a shard just renamed into place.
absl::StatusOr<ManifestShard> describe_shard(const std::string& path) {
  ManifestShard shard;
  shard.name = fs::path(path).filename().string();
  NANOFORGE_ASSIGN_OR_RETURN(const FileChecksum checksum, checksum_file(path));
  shard.bytes = checksum.bytes;
  shard.crc32 = checksum.crc32;
  ShardOpenOptions structure_only;
  structure_only.verify_tokens = false;
  NANOFORGE_ASSIGN_OR_RETURN(const TokenShard opened, open_token_shard(path, structure_only));
  shard.documents = opened.doc_count();
  shard.tokens = opened.token_count();
  shard.token_checksum = opened.stored_checksum().value_or(0);
  return shard;
}

absl::Status check_prep_options(const PrepOptions& options) {
  NANOFORGE_RETURN_IF_ERROR(prep_fault().status());
  if (options.shard_tokens < 1) return absl::InvalidArgumentError("--shard-tokens must be >= 1");
  if (options.val_docs < 0) return absl::InvalidArgumentError("--val-docs must be >= 0");
  if (options.resume && options.overwrite)
    return absl::InvalidArgumentError("give --resume or --overwrite, not both");
  // A run reads every shard file of the directory, and --overwrite deletes in it: nothing else may be there.
  return check_output_directory_is_own(
      "prep", "--out", options.out_dir, is_prep_file_name,
      fmt::format("pick an empty or new directory, or drop --out for the default ({})",
                  kDefaultShardsDirText));
}

// A new prep creates --out; a resume needs it to exist.
absl::Status create_or_find_output_directory(const PrepOptions& options) {
  std::error_code error;
  if (!options.resume) {
    fs::create_directories(options.out_dir, error);
    if (error) {
      return absl::PermissionDeniedError(
          fmt::format("{}: cannot create: {}", options.out_dir, error.message()));
    }
  } else if (!fs::is_directory(options.out_dir, error)) {
    return absl::NotFoundError(fmt::format(
        "--resume: {} holds no unfinished prep (no such directory): leave out --resume to start one",
        options.out_dir));
  }
  return absl::OkStatus();
}

// The documents of one parallel round, with their tokens and their text's hash.
struct EncodedChunk {
  std::vector<Document> documents;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<uint64_t> text_hashes;
};

// Reads the next kChunkDocuments documents (fewer once they hold kChunkBytes of text) into `chunk`; false
// once the input is exhausted.
absl::StatusOr<bool> read_chunk(DocumentReader& reader, std::vector<Document>& chunk) {
  chunk.clear();
  uint64_t chunk_bytes = 0;
  bool more = true;
  while (static_cast<int64_t>(chunk.size()) < kChunkDocuments && chunk_bytes < kChunkBytes) {
    Document document;
    NANOFORGE_ASSIGN_OR_RETURN(more, reader.next(document));
    if (!more) break;
    chunk_bytes += document.text.size();
    chunk.push_back(std::move(document));
  }
  return more;
}

// Encodes and hashes the chunk's documents on all cores.
void encode_chunk(const Tokenizer& tokenizer, EncodedChunk& chunk) {
  const std::vector<Document>& documents = chunk.documents;
  chunk.tokens.resize(documents.size());
  chunk.text_hashes.resize(documents.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < static_cast<int64_t>(documents.size()); ++i) {
    chunk.tokens[i].clear();
    tokenizer.encode(documents[i].text, chunk.tokens[i]);
    chunk.text_hashes[i] = fnv1a64(documents[i].text);
  }
}

// The writing half of a prep: appends encoded documents in reading order to the val and train shards,
// records each finished shard in the journal, and publishes the manifest at the end.
class ShardPrep {
 public:
  // `record` is the journal's contents so far; `documents_hash` that of its documents.
  ShardPrep(const Tokenizer& tokenizer, const PrepOptions& options, ShardManifest record, PrepResult result,
            uint64_t documents_hash)
      : options_(options),
        journal_((fs::path(options.out_dir) / kPrepJournalName).string()),
        record_(std::move(record)),
        result_(std::move(result)),
        val_("val", options, metadata(tokenizer), record_.shard_count("val")),
        train_("train", options, metadata(tokenizer), record_.shard_count("train")),
        input_documents_(record_.input_documents),
        documents_(result_.val_docs + result_.train_docs),
        documents_hash_(documents_hash) {}

  absl::Status append_chunk(const EncodedChunk& chunk, const DocumentReader& reader) {
    for (size_t i = 0; i < chunk.documents.size(); ++i) {
      if (options_.stop_requested && options_.stop_requested()) return stopped();
      NANOFORGE_RETURN_IF_ERROR(
          append_document(chunk.documents[i], chunk.tokens[i], chunk.text_hashes[i], reader));
    }
    return absl::OkStatus();
  }

  void report_progress(const DocumentReader& reader,
                       const std::function<void(const PrepProgress&)>& progress) {
    result_.seconds = seconds_since_start();
    if (progress) {
      progress({documents_, result_.train_tokens + result_.val_tokens, reader.bytes_read(),
                reader.total_bytes(), result_.seconds});
    }
  }

  // The input is exhausted: the last shards are recorded and the manifest published.
  absl::StatusOr<PrepResult> finish(const DocumentReader& reader) {
    std::error_code error;
    if ((documents_ == 0 || result_.train_docs == 0) && record_.shards.empty()) {
      fs::remove(journal_, error);  // the input holds no data set: nothing to resume
    }
    if (documents_ == 0) {
      return absl::InvalidArgumentError(fmt::format("no documents{} in {}",
                                                    result_.empty_docs > 0 ? " with text" : "",
                                                    fmt::join(options_.inputs, ", ")));
    }
    if (result_.train_docs == 0) {
      return absl::InvalidArgumentError(
          fmt::format("all {} documents went to validation (--val-docs {}): lower --val-docs to leave "
                      "documents to train on",
                      documents_, options_.val_docs));
    }
    NANOFORGE_ASSIGN_OR_RETURN(const std::string last_val, val_.close());
    NANOFORGE_RETURN_IF_ERROR(record_shard(last_val));
    NANOFORGE_ASSIGN_OR_RETURN(const std::string last_train, train_.close());
    NANOFORGE_RETURN_IF_ERROR(record_shard(last_train));
    // Published last: from here on the directory is a data set.
    NANOFORGE_RETURN_IF_ERROR(
        write_file_durably((fs::path(options_.out_dir) / kShardManifestName).string(), record_.to_text()));
    fs::remove(journal_, error);
    result_.input_bytes = reader.bytes_read();
    result_.null_texts = reader.null_texts();
    result_.seconds = seconds_since_start();
    return std::move(result_);
  }

 private:
  static ShardMetadata metadata(const Tokenizer& tokenizer) {
    return {tokenizer.vocab_size(), tokenizer.bos_id(), tokenizer.hash()};
  }

  double seconds_since_start() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  absl::Status stopped() const {
    return absl::CancelledError(fmt::format(
        "stopped by a signal after {} documents: {} finished shard{} recorded in {} (the shard being "
        "filled was dropped; no manifest was written, so no run will use the directory); continue with "
        "`nanoforge prep --resume` and the same --input, --tokenizer and --out",
        documents_, record_.shards.size(), record_.shards.size() == 1 ? " is" : "s are", journal_));
  }

  absl::Status append_document(const Document& document, const std::vector<int32_t>& tokens,
                               uint64_t text_hash, const DocumentReader& reader) {
    if (tokens.empty()) {
      consume(text_hash);
      ++result_.empty_docs;
      return absl::OkStatus();
    }
    const bool to_val = documents_++ < options_.val_docs;
    // The validation split is complete: its last shard (without this document) is final.
    if (!to_val && val_.open()) {
      NANOFORGE_ASSIGN_OR_RETURN(const std::string finished, val_.close());
      NANOFORGE_RETURN_IF_ERROR(record_shard(finished));
    }
    consume(text_hash);
    (to_val ? result_.val_docs : result_.train_docs) += 1;
    result_.text_bytes += document.text.size();
    (to_val ? result_.val_tokens : result_.train_tokens) += static_cast<int64_t>(tokens.size()) + 1;
    absl::StatusOr<std::string> finished = (to_val ? val_ : train_).append(tokens);
    if (!finished.ok()) {
      return absl::Status(finished.status().code(),
                          fmt::format("{} line {}: {}", reader.paths()[document.file_index], document.line,
                                      std::string(finished.status().message())));
    }
    NANOFORGE_RETURN_IF_ERROR(record_shard(*finished));
    prep_fault()->pass("after_document", ++appended_);
    return absl::OkStatus();
  }

  // A document is read: counted and hashed (after the record of the shard before it, if any).
  void consume(uint64_t text_hash) {
    ++input_documents_;
    documents_hash_ = fold_document_hash(documents_hash_, text_hash);
  }

  // A shard finished: recorded with everything that led to it (no shard is open at these points).
  absl::Status record_shard(const std::string& path) {
    if (path.empty()) return absl::OkStatus();
    result_.shards.push_back(path);
    prep_fault()->pass("after_shard", ++shards_written_);
    NANOFORGE_ASSIGN_OR_RETURN(ManifestShard shard, describe_shard(path));
    record_.shards.push_back(std::move(shard));
    record_.input_documents = input_documents_;
    record_.input_documents_hash = documents_hash_;
    record_.empty_documents = result_.empty_docs;
    record_.text_bytes = result_.text_bytes;
    NANOFORGE_RETURN_IF_ERROR(write_file_durably(journal_, record_.to_text()));
    prep_fault()->pass("after_record", shards_written_);
    return absl::OkStatus();
  }

  const PrepOptions& options_;
  const std::string journal_;
  ShardManifest record_;
  PrepResult result_;
  SplitWriter val_, train_;
  int64_t input_documents_;     // read from the input, empty ones and a resume's re-read ones included
  int64_t documents_;           // with text, in either split
  uint64_t documents_hash_;     // of the input documents read so far (ShardManifest)
  int64_t appended_ = 0;        // documents appended by this process (the fault point's count)
  int64_t shards_written_ = 0;  // shards renamed into place by this process (the fault point's count)
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The result's counts of what the record says is already in its shards.
PrepResult recorded_counts(const ShardManifest& record, std::vector<std::string> removed_shards) {
  PrepResult result;
  result.removed_shards = std::move(removed_shards);
  result.resumed_shards = static_cast<int64_t>(record.shards.size());
  result.val_docs = record.documents("val");
  result.train_docs = record.documents("train");
  result.val_tokens = record.tokens("val");
  result.train_tokens = record.tokens("train");
  result.empty_docs = record.empty_documents;
  result.text_bytes = record.text_bytes;
  return result;
}

}  // namespace

absl::StatusOr<PrepResult> prep_shards(const Tokenizer& tokenizer, const PrepOptions& options,
                                       const std::function<void(const PrepProgress&)>& progress) {
  NANOFORGE_RETURN_IF_ERROR(check_prep_options(options));
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_document_paths(options.inputs));
  ShardManifest record = settings_record(tokenizer, options, paths);
  NANOFORGE_RETURN_IF_ERROR(create_or_find_output_directory(options));
  // From here on this prep alone writes --out; a second one is refused before it changes anything.
  NANOFORGE_ASSIGN_OR_RETURN(const PrepLock lock, PrepLock::acquire(options.out_dir, options.command_line));
  std::vector<std::string> removed_shards;
  if (options.resume) {
    NANOFORGE_ASSIGN_OR_RETURN(std::optional<ShardManifest> unfinished, record_to_resume(options, record));
    if (!unfinished) {
      PrepResult result;
      result.already_complete = true;
      return result;
    }
    record = std::move(*unfinished);
    delete_unrecorded_files(options, record);
  } else {
    NANOFORGE_ASSIGN_OR_RETURN(removed_shards, clear_output_directory(options));
    NANOFORGE_RETURN_IF_ERROR(
        write_file_durably((fs::path(options.out_dir) / kPrepJournalName).string(), record.to_text()));
  }
  NANOFORGE_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::open(paths, options.documents));
  NANOFORGE_ASSIGN_OR_RETURN(const uint64_t documents_hash, reread_recorded_documents(reader, record, paths));
  PrepResult result = recorded_counts(record, std::move(removed_shards));
  ShardPrep prep(tokenizer, options, std::move(record), std::move(result), documents_hash);
  EncodedChunk chunk;
  for (bool more = true; more;) {
    NANOFORGE_ASSIGN_OR_RETURN(more, read_chunk(reader, chunk.documents));
    encode_chunk(tokenizer, chunk);
    NANOFORGE_RETURN_IF_ERROR(prep.append_chunk(chunk, reader));
    prep.report_progress(reader, progress);
  }
  return prep.finish(reader);
}

}  // namespace nanoforge
