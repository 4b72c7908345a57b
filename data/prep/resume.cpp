// The record a prep keeps of its settings and input, and the checks a resume makes against it: the same
// settings and input files, the recorded shards' bytes, and the same documents read again.
#include "data/prep/resume.h"

#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/file_checksum.h"
#include "support/status.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kInputSampleBytes = 1 << 20;  // an input's first and last MiB are hashed into its identity

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
}  // The record of an interrupted prep, checked against this one's settings and against its shard files.
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
  for (const ManifestShard& shard : record.shards) {
    const std::string path = (fs::path(options.out_dir) / shard.name).string();
    const absl::StatusOr<FileChecksum> checksum = checksum_file(path);
    if (!checksum.ok() || checksum->bytes != shard.bytes || checksum->crc32 != shard.crc32) {
      return absl::DataLossError(fmt::format(
          "--resume: {} is recorded in {} but {}: start over with --overwrite", path, kPrepJournalName,
          checksum.ok() ? "its bytes changed since" : std::string(checksum.status().message())));
    }
  }
  return record;
}

}  // namespace

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

absl::StatusOr<std::optional<ShardManifest>> record_to_resume(const PrepOptions& options,
                                                              const ShardManifest& settings) {
  std::error_code error;
  if (!fs::exists(fs::path(options.out_dir) / kPrepJournalName, error)) {
    if (fs::exists(fs::path(options.out_dir) / kShardManifestName, error)) return std::nullopt;
    return absl::NotFoundError(
        fmt::format("--resume: {} holds no unfinished prep ({}): leave out --resume to start one",
                    options.out_dir, kPrepJournalName));
  }
  return reopen_unfinished(options, settings);
}

absl::StatusOr<uint64_t> reread_recorded_documents(DocumentReader& reader, const ShardManifest& record,
                                                   const std::vector<std::string>& paths) {
  uint64_t documents_hash = kFnv1aStart;
  Document skipped;
  for (int64_t input_documents = 0; input_documents < record.input_documents; ++input_documents) {
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
  return documents_hash;
}

}  // namespace nanoforge
