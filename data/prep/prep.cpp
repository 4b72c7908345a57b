// prep_shards: take --out's lock, read a chunk of documents, encode (and hash) them in parallel, append them
// in order to the open shard; record each finished shard in prep.unfinished, and publish manifest.txt at the
// end. A resume re-reads the input up to the last recorded shard's last document, checks that it hashes as
// recorded, and carries on from there.
#include "data/prep/prep.h"

#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <set>

#include "data/prep/prep_lock.h"
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

constexpr int64_t kChunkDocuments = 4096;       // documents encoded per parallel round
constexpr uint64_t kChunkBytes = 32ull << 20;   // ... or fewer, once they hold this much text
constexpr int64_t kInputSampleBytes = 1 << 20;  // an input's first and last MiB are hashed into its identity

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

// FNV-1a 64 of a file's first and last MiB (all of it when it is smaller than 2 MiB); 0 when it cannot be
// read (the document reader then says why).
uint64_t input_sample_hash(const std::string& path, int64_t bytes) {
  std::ifstream file(path, std::ios::binary);
  std::string sample(static_cast<size_t>(std::min(bytes, 2 * kInputSampleBytes)), '\0');
  const int64_t head = std::min(bytes, kInputSampleBytes), tail = static_cast<int64_t>(sample.size()) - head;
  file.read(sample.data(), head);
  file.seekg(bytes - tail);
  file.read(sample.data() + head, tail);
  return file ? fnv1a64(sample) : 0;
}

// "BYTES MTIME_NS HASH PATH" of each input file: a resume refuses input that changed, even under the same
// size and modification time where the change is in its first or last MiB.
std::vector<std::string> input_identity(const std::vector<std::string>& paths) {
  std::vector<std::string> identity;
  for (const std::string& path : paths) {
    struct stat info {};
    if (path == "-" || stat(path.c_str(), &info) != 0) {
      identity.push_back(fmt::format("0 0 {:016x} {}", 0, path));
      continue;
    }
    const int64_t mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
    identity.push_back(fmt::format("{} {} {:016x} {}", static_cast<int64_t>(info.st_size), mtime_ns,
                                   input_sample_hash(path, info.st_size), path));
  }
  return identity;
}

// "BYTES MTIME_NS", "HASH" and "PATH" of an input's identity.
struct InputIdentity {
  std::string size_and_mtime, hash, path;
};

InputIdentity split_identity(const std::string& identity) {
  const std::vector<std::string> words = absl::StrSplit(identity, absl::MaxSplits(' ', 3));
  if (words.size() != 4) return {identity, "", ""};
  return {words[0] + " " + words[1], words[2], words[3]};
}

// How the input files differ between a record and now, naming the file; "" when they do not.
std::string changed_input(const std::vector<std::string>& then, const std::vector<std::string>& now) {
  for (size_t i = 0; i < std::min(then.size(), now.size()); ++i) {
    const InputIdentity before = split_identity(then[i]), after = split_identity(now[i]);
    if (before.path == after.path && before.size_and_mtime == after.size_and_mtime &&
        before.hash != after.hash) {
      return fmt::format(
          "{}: its first or last MiB changed since the prep started, though its size and modification "
          "time did not",
          after.path);
    }
  }
  if (then == now) return "";
  return fmt::format("the input files (--input; size, modification time, hash, path): {} then, {} now",
                     fmt::join(then, "; "), fmt::join(now, "; "));
}

ShardManifest settings_record(const Tokenizer& tokenizer, const PrepOptions& options,
                              const std::vector<std::string>& paths) {
  ShardManifest record;
  record.tokenizer_hash = tokenizer.hash();
  record.vocab_size = tokenizer.vocab_size();
  record.bos_id = tokenizer.bos_id();
  record.shard_tokens = options.shard_tokens;
  record.val_docs = options.val_docs;
  record.text_split = options.documents.text_split == TextSplit::kWholeFile ? "file" : "paragraphs";
  record.text_column = options.documents.text_column;
  record.inputs = input_identity(paths);
  record.command_line = options.command_line;
  return record;
}

// What a resume may not change, as "what: then -> now"; "" when nothing did.
std::string changed_setting(const ShardManifest& then, const ShardManifest& now) {
  const std::pair<const char*, std::pair<std::string, std::string>> settings[] = {
      {"the tokenizer (--tokenizer)", {then.tokenizer_hash, now.tokenizer_hash}},
      {"--shard-tokens", {std::to_string(then.shard_tokens), std::to_string(now.shard_tokens)}},
      {"--val-docs", {std::to_string(then.val_docs), std::to_string(now.val_docs)}},
      {"--text-split", {then.text_split, now.text_split}},
      {"--text-column", {then.text_column, now.text_column}}};
  for (const auto& [what, values] : settings) {
    if (values.first != values.second)
      return fmt::format("{}: {} then, {} now", what, values.first, values.second);
  }
  return changed_input(then.inputs, now.inputs);
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

// The record of an interrupted prep, checked against this one's settings and against its shard files;
// prep's files it does not list (shards written after it, unfinished files) are deleted.
absl::StatusOr<ShardManifest> reopen_unfinished(const PrepOptions& options, const ShardManifest& settings) {
  const fs::path journal = fs::path(options.out_dir) / kPrepJournalName;
  std::ifstream file(journal, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  NANOFORGE_ASSIGN_OR_RETURN(ShardManifest record, ShardManifest::parse(text, journal.string()));
  if (record.format_version < kShardManifestVersion) {
    return absl::FailedPreconditionError(fmt::format(
        "--resume: {} was written by an earlier nanoforge (format {}), which did not record what a resume "
        "now checks of the input: start over with --overwrite",
        journal.string(), record.format_version));
  }
  if (const std::string change = changed_setting(record, settings); !change.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "--resume: {} was started with other settings or input: {}. Resume with the same ones, or start "
        "over with --overwrite",
        options.out_dir, change));
  }
  for (const std::string& input : settings.inputs) {
    if (input.ends_with(" -")) {
      return absl::FailedPreconditionError(
          "--resume: standard input cannot be read again from its start; start over with --overwrite");
    }
  }
  std::set<std::string> recorded;
  for (const ManifestShard& shard : record.shards) {
    const std::string path = (fs::path(options.out_dir) / shard.name).string();
    const absl::StatusOr<FileChecksum> checksum = checksum_file(path);
    if (!checksum.ok() || checksum->bytes != shard.bytes || checksum->crc32 != shard.crc32) {
      return absl::DataLossError(fmt::format(
          "--resume: {} is recorded in {} but {}: start over with --overwrite", path, kPrepJournalName,
          checksum.ok() ? "its bytes changed since" : std::string(checksum.status().message())));
    }
    recorded.insert(shard.name);
  }
  std::error_code error;
  for (fs::directory_iterator entry(options.out_dir, error), end; !error && entry != end;
       entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (std::regex_match(name, own_file_pattern()) && !recorded.count(name) && name != kPrepJournalName)
      fs::remove(entry->path(), error);
  }
  return record;
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

}  // namespace

absl::StatusOr<PrepResult> prep_shards(const Tokenizer& tokenizer, const PrepOptions& options,
                                       const std::function<void(const PrepProgress&)>& progress) {
  NANOFORGE_RETURN_IF_ERROR(prep_fault().status());
  if (options.shard_tokens < 1) return absl::InvalidArgumentError("--shard-tokens must be >= 1");
  if (options.val_docs < 0) return absl::InvalidArgumentError("--val-docs must be >= 0");
  if (options.resume && options.overwrite)
    return absl::InvalidArgumentError("give --resume or --overwrite, not both");
  // A run reads every shard file of the directory, and --overwrite deletes in it: nothing else may be there.
  NANOFORGE_RETURN_IF_ERROR(check_output_directory_is_own(
      "prep", "--out", options.out_dir, is_prep_file_name,
      fmt::format("pick an empty or new directory, or drop --out for the default ({})",
                  kDefaultShardsDirText)));
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_document_paths(options.inputs));
  PrepResult result;
  const fs::path journal = fs::path(options.out_dir) / kPrepJournalName;
  ShardManifest record = settings_record(tokenizer, options, paths);
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
  // From here on this prep alone writes --out; a second one is refused before it changes anything.
  NANOFORGE_ASSIGN_OR_RETURN(const PrepLock lock, PrepLock::acquire(options.out_dir, options.command_line));
  if (options.resume) {
    if (!fs::exists(journal, error)) {
      if (fs::exists(fs::path(options.out_dir) / kShardManifestName, error)) {
        result.already_complete = true;
        return result;
      }
      return absl::NotFoundError(
          fmt::format("--resume: {} holds no unfinished prep ({}): leave out --resume to start one",
                      options.out_dir, kPrepJournalName));
    }
    NANOFORGE_ASSIGN_OR_RETURN(record, reopen_unfinished(options, record));
  } else {
    NANOFORGE_ASSIGN_OR_RETURN(result.removed_shards, clear_output_directory(options));
    NANOFORGE_RETURN_IF_ERROR(write_file_durably(journal.string(), record.to_text()));
  }
  NANOFORGE_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::open(paths, options.documents));
  result.resumed_shards = static_cast<int64_t>(record.shards.size());
  result.val_docs = record.documents("val");
  result.train_docs = record.documents("train");
  result.val_tokens = record.tokens("val");
  result.train_tokens = record.tokens("train");
  result.empty_docs = record.empty_documents;
  result.text_bytes = record.text_bytes;
  int64_t input_documents = 0, documents = result.val_docs + result.train_docs, appended = 0;
  uint64_t documents_hash = kFnv1aStart;  // of the input documents read so far (ShardManifest)
  for (Document skipped; input_documents < record.input_documents; ++input_documents) {
    NANOFORGE_ASSIGN_OR_RETURN(const bool more, reader.next(skipped));
    if (!more) {
      return absl::FailedPreconditionError(fmt::format(
          "--resume: the input ends after {} documents, but {} recorded {}: it changed; start over with "
          "--overwrite",
          input_documents, kPrepJournalName, record.input_documents));
    }
    documents_hash = fold_document_hash(documents_hash, fnv1a64(skipped.text));
  }
  if (documents_hash != record.input_documents_hash) {
    return absl::FailedPreconditionError(fmt::format(
        "--resume: the documents read again are not those the recorded shards were made of (the first {} "
        "hash to {:016x}, {} recorded {:016x}): the input ({}) changed though each file kept its size, "
        "modification time and first and last MiB; start over with --overwrite",
        record.input_documents, documents_hash, kPrepJournalName, record.input_documents_hash,
        fmt::join(paths, ", ")));
  }

  const ShardMetadata metadata{tokenizer.vocab_size(), tokenizer.bos_id(), tokenizer.hash()};
  SplitWriter val("val", options, metadata, record.shard_count("val"));
  SplitWriter train("train", options, metadata, record.shard_count("train"));
  int64_t shards_written = 0;
  // A shard finished: recorded with everything that led to it (no shard is open at these points).
  auto record_shard = [&](const std::string& path) -> absl::Status {
    if (path.empty()) return absl::OkStatus();
    result.shards.push_back(path);
    prep_fault()->pass("after_shard", ++shards_written);
    NANOFORGE_ASSIGN_OR_RETURN(ManifestShard shard, describe_shard(path));
    record.shards.push_back(std::move(shard));
    record.input_documents = input_documents;
    record.input_documents_hash = documents_hash;
    record.empty_documents = result.empty_docs;
    record.text_bytes = result.text_bytes;
    NANOFORGE_RETURN_IF_ERROR(write_file_durably(journal.string(), record.to_text()));
    prep_fault()->pass("after_record", shards_written);
    return absl::OkStatus();
  };

  const auto start = std::chrono::steady_clock::now();
  std::vector<Document> chunk;
  std::vector<std::vector<int32_t>> encoded;
  std::vector<uint64_t> text_hashes;
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
    text_hashes.resize(chunk.size());
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < static_cast<int64_t>(chunk.size()); ++i) {
      encoded[i].clear();
      tokenizer.encode(chunk[i].text, encoded[i]);
      text_hashes[i] = fnv1a64(chunk[i].text);
    }
    // Document i is read: counted and hashed (after the record of the shard before it, if any).
    auto consume = [&](size_t i) {
      ++input_documents;
      documents_hash = fold_document_hash(documents_hash, text_hashes[i]);
    };
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (options.stop_requested && options.stop_requested()) {
        return absl::CancelledError(fmt::format(
            "stopped by a signal after {} documents: {} finished shard{} recorded in {} (the shard being "
            "filled was dropped; no manifest was written, so no run will use the directory); continue with "
            "`nanoforge prep --resume` and the same --input, --tokenizer and --out",
            documents, record.shards.size(), record.shards.size() == 1 ? " is" : "s are", journal.string()));
      }
      if (encoded[i].empty()) {
        consume(i);
        ++result.empty_docs;
        continue;
      }
      const bool to_val = documents++ < options.val_docs;
      // The validation split is complete: its last shard (without this document) is final.
      if (!to_val && val.open()) {
        NANOFORGE_ASSIGN_OR_RETURN(const std::string finished, val.close());
        NANOFORGE_RETURN_IF_ERROR(record_shard(finished));
      }
      consume(i);
      (to_val ? result.val_docs : result.train_docs) += 1;
      result.text_bytes += chunk[i].text.size();
      (to_val ? result.val_tokens : result.train_tokens) += static_cast<int64_t>(encoded[i].size()) + 1;
      absl::StatusOr<std::string> finished = (to_val ? val : train).append(encoded[i]);
      if (!finished.ok()) {
        return absl::Status(finished.status().code(),
                            fmt::format("{} line {}: {}", reader.paths()[chunk[i].file_index], chunk[i].line,
                                        std::string(finished.status().message())));
      }
      NANOFORGE_RETURN_IF_ERROR(record_shard(*finished));
      prep_fault()->pass("after_document", ++appended);
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) {
      progress({documents, result.train_tokens + result.val_tokens, reader.bytes_read(), reader.total_bytes(),
                result.seconds});
    }
  }
  if ((documents == 0 || result.train_docs == 0) && record.shards.empty()) {
    fs::remove(journal, error);  // the input holds no data set: nothing to resume
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
  NANOFORGE_ASSIGN_OR_RETURN(const std::string last_val, val.close());
  NANOFORGE_RETURN_IF_ERROR(record_shard(last_val));
  NANOFORGE_ASSIGN_OR_RETURN(const std::string last_train, train.close());
  NANOFORGE_RETURN_IF_ERROR(record_shard(last_train));
  // Published last: from here on the directory is a data set.
  NANOFORGE_RETURN_IF_ERROR(
      write_file_durably((fs::path(options.out_dir) / kShardManifestName).string(), record.to_text()));
  fs::remove(journal, error);
  result.input_bytes = reader.bytes_read();
  result.null_texts = reader.null_texts();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace nanoforge
