// ShardManifest as text (one `key value` per line, values that may hold spaces last and escaped), the atomic
// write, and the loader's check of a directory's shards against it.
#include "data/shards/shard_manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "support/status.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr char kFormatLine[] = "nanoforge-shards 1";
constexpr int64_t kMaxManifestBytes = 64 << 20;

std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string unescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      out += text[++i] == 'n' ? '\n' : text[i];
    } else {
      out += text[i];
    }
  }
  return out;
}

absl::StatusOr<std::string> read_small_file(const std::string& path) {
  std::error_code error;
  const auto bytes = fs::file_size(path, error);
  if (error) return absl::NotFoundError(fmt::format("{}: cannot read: {}", path, error.message()));
  if (bytes > static_cast<uintmax_t>(kMaxManifestBytes)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} bytes, more than a manifest may hold", path, bytes));
  }
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

bool same_directory(const fs::path& a, const fs::path& b) {
  std::error_code error;
  return fs::equivalent(a, b, error);
}

// One shard of the set against its manifest entry.
absl::Status check_shard(const TokenShard& shard, const ManifestShard& listed,
                         const std::string& manifest_path, const ShardManifest& manifest) {
  std::error_code error;
  const auto bytes = static_cast<int64_t>(fs::file_size(shard.path(), error));
  const uint64_t checksum = shard.stored_checksum().value_or(0);
  std::string difference;
  if (bytes != listed.bytes)
    difference = fmt::format("{} bytes, the manifest says {}", bytes, listed.bytes);
  else if (shard.doc_count() != listed.documents)
    difference = fmt::format("{} documents, the manifest says {}", shard.doc_count(), listed.documents);
  else if (shard.token_count() != listed.tokens)
    difference = fmt::format("{} tokens, the manifest says {}", shard.token_count(), listed.tokens);
  else if (checksum != listed.token_checksum)
    difference =
        fmt::format("token checksum {:#x}, the manifest says {:#x}", checksum, listed.token_checksum);
  else if (shard.tokenizer_hash() != manifest.tokenizer_hash)
    difference =
        fmt::format("tokenizer {}, the manifest says {}", shard.tokenizer_hash(), manifest.tokenizer_hash);
  if (difference.empty()) return absl::OkStatus();
  return absl::DataLossError(
      fmt::format("{} disagrees with {}: {}; it changed after prep wrote it: prepare the data set again",
                  shard.path(), manifest_path, difference));
}

absl::Status refuse_without_manifest(const fs::path& directory) {
  const fs::path journal = directory / kPrepJournalName;
  std::error_code error;
  if (fs::exists(journal, error)) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: a prep that did not finish ({} is there, {} is not): its shards are not the whole data set. "
        "Continue it with `nanoforge prep --resume` and the same --input, --tokenizer and --out, or start "
        "over with --overwrite",
        directory.string(), kPrepJournalName, kShardManifestName));
  }
  return absl::FailedPreconditionError(fmt::format(
      "{}: token shards without a {}, so nothing says they are a whole data set (a prep killed mid-way "
      "leaves shards that look complete; preps before nanoforge wrote manifests leave none). Prepare it "
      "again: `nanoforge prep --input ... --tokenizer ... --out {} --overwrite`",
      directory.string(), kShardManifestName, directory.string()));
}

}  // namespace

int64_t ShardManifest::documents(std::string_view split) const {
  int64_t total = 0;
  for (const ManifestShard& shard : shards)
    if (shard.split() == split) total += shard.documents;
  return total;
}

int64_t ShardManifest::tokens(std::string_view split) const {
  int64_t total = 0;
  for (const ManifestShard& shard : shards)
    if (shard.split() == split) total += shard.tokens;
  return total;
}

int64_t ShardManifest::shard_count(std::string_view split) const {
  int64_t count = 0;
  for (const ManifestShard& shard : shards)
    count += shard.split() == split;
  return count;
}

std::string ShardManifest::to_text() const {
  std::string text = fmt::format("{}\n", kFormatLine);
  text += fmt::format("tokenizer_hash {}\nvocab_size {}\nbos_id {}\n", tokenizer_hash, vocab_size, bos_id);
  text += fmt::format("shard_tokens {}\nval_docs {}\n", shard_tokens, val_docs);
  text += fmt::format("text_split {}\ntext_column {}\n", escape(text_split), escape(text_column));
  text += fmt::format("command {}\n", escape(command_line));
  for (const std::string& input : inputs)
    text += fmt::format("input {}\n", escape(input));
  text += fmt::format("input_documents {}\nempty_documents {}\ntext_bytes {}\n", input_documents,
                      empty_documents, text_bytes);
  for (const char* split : {"val", "train"}) {
    text += fmt::format("split {} documents {} tokens {} shards {}\n", split, documents(split), tokens(split),
                        shard_count(split));
  }
  for (const ManifestShard& shard : shards) {
    text += fmt::format("shard {} {} {:08x} {} {} {:016x}\n", shard.name, shard.bytes, shard.crc32,
                        shard.documents, shard.tokens, shard.token_checksum);
  }
  return text;
}

absl::StatusOr<ShardManifest> ShardManifest::parse(std::string_view text, const std::string& source) {
  const std::vector<std::string> lines = absl::StrSplit(std::string(text), '\n', absl::SkipEmpty());
  if (lines.empty() || lines.front() != kFormatLine) {
    return absl::DataLossError(fmt::format(
        "{}: not a nanoforge shard manifest (its first line is not \"{}\")", source, kFormatLine));
  }
  ShardManifest manifest;
  for (size_t n = 1; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    const std::vector<std::string> words = absl::StrSplit(value, ' ');
    auto bad = [&] {
      return absl::DataLossError(fmt::format("{}: line {} is damaged: {}", source, n + 1, line));
    };
    auto number = [&](const std::string& word, auto& out) { return absl::SimpleAtoi(word, &out); };
    auto hex_number = [&](const std::string& word, auto* out) {
      const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *out, 16);
      return !word.empty() && error == std::errc() && end == word.data() + word.size();
    };
    bool ok = true;
    if (key == "tokenizer_hash")
      manifest.tokenizer_hash = value;
    else if (key == "vocab_size")
      ok = number(value, manifest.vocab_size);
    else if (key == "bos_id")
      ok = number(value, manifest.bos_id);
    else if (key == "shard_tokens")
      ok = number(value, manifest.shard_tokens);
    else if (key == "val_docs")
      ok = number(value, manifest.val_docs);
    else if (key == "text_split")
      manifest.text_split = unescape(value);
    else if (key == "text_column")
      manifest.text_column = unescape(value);
    else if (key == "command")
      manifest.command_line = unescape(value);
    else if (key == "input")
      manifest.inputs.push_back(unescape(value));
    else if (key == "input_documents")
      ok = number(value, manifest.input_documents);
    else if (key == "empty_documents")
      ok = number(value, manifest.empty_documents);
    else if (key == "text_bytes")
      ok = number(value, manifest.text_bytes);
    else if (key == "split")
      ok = words.size() == 7;  // derived from the shards; checked below
    else if (key == "shard") {
      ManifestShard shard;
      ok = words.size() == 6 && fs::path(words[0]).filename() == words[0] && number(words[1], shard.bytes) &&
           hex_number(words[2], &shard.crc32) && number(words[3], shard.documents) &&
           number(words[4], shard.tokens) && hex_number(words[5], &shard.token_checksum);
      shard.name = words[0];
      manifest.shards.push_back(std::move(shard));
    } else {
      ok = false;
    }
    if (!ok) return bad();
  }
  // The split lines must say what the shards add up to: a manifest cut or edited by hand is refused.
  if (manifest.to_text() != std::string(text)) {
    return absl::DataLossError(fmt::format(
        "{}: its totals do not match its shards, or it is not as prep writes it: it was damaged or "
        "edited; prepare the data set again",
        source));
  }
  return manifest;
}

std::string manifest_hash(std::string_view manifest_text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : manifest_text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", hash);
}

absl::Status write_file_durably(const std::string& path, std::string_view text) {
  const std::string temporary = path + ".tmp";
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool written = fd >= 0;
  for (size_t done = 0; written && done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    written = n > 0;
    done += written ? static_cast<size_t>(n) : 0;
  }
  written = written && fsync(fd) == 0;
  const int error = errno;
  if (fd >= 0) close(fd);
  if (!written || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot write: {}", path, std::strerror(written ? errno : error)));
  }
  const int directory = open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) {
    fsync(directory);
    close(directory);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> check_shard_manifests(const std::string& location, std::string_view split,
                                                  const ShardSet& set) {
  std::vector<std::string> hashes;
  const std::vector<std::string> places = absl::StrSplit(location, ',', absl::SkipEmpty());
  for (const std::string& place : places) {
    std::error_code error;
    const bool directory_place = fs::is_directory(place, error);
    // The shards of the set that this place contributed.
    std::vector<const TokenShard*> here;
    for (int64_t i = 0; i < set.shard_count(); ++i) {
      const fs::path path(set.shard(i).path());
      if (path.extension() != ".h5") continue;
      if (directory_place ? same_directory(path.parent_path(), place) : same_directory(path, place))
        here.push_back(&set.shard(i));
    }
    if (here.empty()) continue;
    const fs::path directory = directory_place ? fs::path(place) : fs::path(place).parent_path();
    const fs::path manifest_path = directory / kShardManifestName;
    if (!fs::exists(manifest_path, error)) {
      // A shard file named on its own, from a directory that was never a prep's, is the user's choice.
      if (directory_place || fs::exists(directory / kPrepJournalName, error))
        return refuse_without_manifest(directory);
      continue;
    }
    NANOFORGE_ASSIGN_OR_RETURN(const std::string text, read_small_file(manifest_path.string()));
    NANOFORGE_ASSIGN_OR_RETURN(const ShardManifest manifest,
                               ShardManifest::parse(text, manifest_path.string()));
    std::map<std::string, const ManifestShard*> listed;
    for (const ManifestShard& shard : manifest.shards)
      if (split.empty() || shard.split() == split || !directory_place) listed[shard.name] = &shard;
    std::map<std::string, bool> seen;
    for (const TokenShard* shard : here) {
      const std::string name = fs::path(shard->path()).filename().string();
      const auto entry = listed.find(name);
      if (entry == listed.end()) {
        return absl::FailedPreconditionError(fmt::format(
            "{} is not in {}: the prep that made this data set did not write it; remove it, or prepare the "
            "data set again",
            shard->path(), manifest_path.string()));
      }
      NANOFORGE_RETURN_IF_ERROR(check_shard(*shard, *entry->second, manifest_path.string(), manifest));
      seen[name] = true;
    }
    if (directory_place) {
      for (const auto& [name, shard] : listed) {
        if (!seen.count(name)) {
          return absl::DataLossError(fmt::format(
              "{} lists {}, which is missing: the data set is incomplete; restore the file or prepare the "
              "data set again",
              manifest_path.string(), (directory / name).string()));
        }
      }
    }
    hashes.push_back(manifest_hash(text));
  }
  return fmt::format("{}", fmt::join(hashes, ","));
}

}  // namespace nanoforge
