// ShardSet: opening (verification spread over the cores: HDF5 is not thread-safe, but checking mapped tokens
// is), the global document numbering, the fingerprint, and finding a split's files.
#include "data/shards/shard_set.h"

#include "data/shards/open_shard.h"

#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "support/status.h"

namespace nanoforge {
namespace {

void fnv1a(uint64_t& hash, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
}

std::string with_thousands(int64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

ShardSet::ShardSet(std::vector<TokenShard> shards) : shards_(std::move(shards)) {
  first_doc_.push_back(0);
  fingerprint_ = 0xcbf29ce484222325ull;
  for (const TokenShard& shard : shards_) {
    first_doc_.push_back(first_doc_.back() + shard.doc_count());
    token_count_ += shard.token_count();
    const std::string name = std::filesystem::path(shard.path()).filename().string();
    fnv1a(fingerprint_, name.data(), name.size() + 1);
    const int64_t counts[2] = {shard.token_count(), shard.doc_count()};
    fnv1a(fingerprint_, counts, sizeof(counts));
    const uint64_t checksum = shard.stored_checksum().value_or(0);
    fnv1a(fingerprint_, &checksum, sizeof(checksum));
  }
}

absl::StatusOr<std::shared_ptr<const ShardSet>> ShardSet::from_shards(std::vector<TokenShard> shards) {
  if (shards.empty()) return absl::InvalidArgumentError("no shards given");
  const TokenShard& first = shards.front();
  for (const TokenShard& shard : shards) {
    if (shard.vocab_size() != first.vocab_size() || shard.bos_id() != first.bos_id() ||
        shard.tokenizer_hash() != first.tokenizer_hash()) {
      return absl::FailedPreconditionError(
          fmt::format("{} (vocab {}, BOS {}, tokenizer \"{}\") and {} (vocab {}, BOS {}, tokenizer \"{}\") "
                      "were made with "
                      "different tokenizers; one data set must use one tokenizer",
                      first.path(), first.vocab_size(), first.bos_id(), first.tokenizer_hash(), shard.path(),
                      shard.vocab_size(), shard.bos_id(), shard.tokenizer_hash()));
    }
  }
  return std::shared_ptr<const ShardSet>(new ShardSet(std::move(shards)));
}

absl::StatusOr<std::shared_ptr<const ShardSet>> ShardSet::open(const std::vector<std::string>& paths,
                                                               const ShardOpenOptions& options) {
  if (paths.empty()) return absl::InvalidArgumentError("no shard files given");
  ShardOpenOptions structure_only = options;
  structure_only.verify_tokens = false;
  std::vector<TokenShard> shards;
  shards.reserve(paths.size());
  for (const std::string& path : paths) {
    NANOFORGE_ASSIGN_OR_RETURN(TokenShard shard, open_token_shard(path, structure_only));
    shards.push_back(std::move(shard));
  }
  if (options.verify_tokens) {
    std::vector<absl::Status> results(shards.size());
    std::atomic<size_t> next{0};
    const size_t workers = std::min<size_t>(shards.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < shards.size(); i = next++) {
          if (shards[i].format() == ShardFormat::kNanoforgeHdf5) results[i] = shards[i].verify_tokens();
        }
      });
    }
    for (std::thread& thread : threads)
      thread.join();
    for (const absl::Status& result : results)
      NANOFORGE_RETURN_IF_ERROR(result);
  }
  return from_shards(std::move(shards));
}

ShardSet::DocLocation ShardSet::locate(int64_t global_doc) const {
  const auto after = std::upper_bound(first_doc_.begin(), first_doc_.end(), global_doc);
  const auto shard = static_cast<int64_t>(after - first_doc_.begin()) - 1;
  const int64_t doc = global_doc - first_doc_[static_cast<size_t>(shard)];
  return {shard, doc, shards_[static_cast<size_t>(shard)].doc_length(doc)};
}

std::string ShardSet::describe() const {
  return fmt::format("{} shard{}, {} documents, {} tokens", shard_count(), shard_count() == 1 ? "" : "s",
                     with_thousands(doc_count()), with_thousands(token_count()));
}

absl::StatusOr<std::vector<std::string>> list_shard_files(const std::string& location,
                                                          std::string_view split) {
  std::vector<std::string> files;
  const std::vector<std::string> places = absl::StrSplit(location, ',', absl::SkipEmpty());
  for (const std::string& place : places) {
    const std::filesystem::path path{place};
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) {
      files.push_back(path.string());
      continue;
    }
    if (!std::filesystem::is_directory(path, error)) {
      return absl::NotFoundError(fmt::format("{}: no such file or directory", path.string()));
    }
    std::vector<std::string> found;
    // error_code overloads throughout: a dangling or looping symlink, or a file vanishing while listed, is
    // skipped or reported, never thrown.
    for (std::filesystem::directory_iterator entry(path, error), end; !error && entry != end;
         entry.increment(error)) {
      std::error_code kind_error;
      if (!entry->is_regular_file(kind_error)) continue;
      const std::string extension = entry->path().extension().string();
      if (extension != ".h5" && extension != ".bin") continue;
      const std::string stem = entry->path().stem().string();
      bool matches = split.empty();
      const std::vector<std::string> words = absl::StrSplit(stem, absl::ByAnyChar("_-."));
      for (const std::string& word : words)
        matches |= word == split;
      if (matches) found.push_back(entry->path().string());
    }
    if (error)
      return absl::PermissionDeniedError(fmt::format("{}: cannot list: {}", path.string(), error.message()));
    if (found.empty()) {
      return absl::NotFoundError(fmt::format(
          "{}: no {} shards here (expected .h5 or .bin files with \"{}\" in the name, like {}_00000.h5 or "
          "fineweb_{}_000001.bin)",
          path.string(), split.empty() ? "token" : std::string(split), split, split, split));
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) return absl::InvalidArgumentError("no shard location given");
  return files;
}

absl::StatusOr<std::vector<std::string>> list_split_shard_files(const std::string& location,
                                                                std::string_view split) {
  absl::StatusOr<std::vector<std::string>> files = list_shard_files(location, split);
  if (files.ok() || !absl::IsNotFound(files.status())) return files;
  const absl::StatusOr<std::vector<std::string>> all = list_shard_files(location, "");
  if (!all.ok()) return files.status();
  for (const std::string& file : *all) {
    const std::vector<std::string> words =
        absl::StrSplit(std::filesystem::path(file).stem().string(), absl::ByAnyChar("_-."));
    for (const std::string& word : words) {
      if (word == "train" || word == "val") {
        return absl::NotFoundError(fmt::format(
            "{}: no {} shards, only shards of another split ({}{}); point it at the {} shards", location,
            split, std::filesystem::path(file).filename().string(), all->size() > 1 ? ", ..." : "", split));
      }
    }
  }
  return all;  // a location holding only this split, under names without one
}

}  // namespace nanoforge
