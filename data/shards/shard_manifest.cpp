// ShardManifest as text (one `key value` per line, values that may hold spaces last and escaped, then the
// checksum of the lines above), the atomic write, and the checks of a set's shards against their manifests:
// sizes and CRC-32s before the shards are opened, their headers after.
#include "data/shards/shard_manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "support/file_checksum.h"
#include "support/status.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr char kFormatName[] = "nanoforge-shards";
constexpr char kChecksumKey[] = "manifest_checksum";  // the last line (format 2)
constexpr int64_t kMaxManifestBytes = 64 << 20;
constexpr char kPrepareAgain[] = "prepare the data set again (`nanoforge prep ... --overwrite`)";
constexpr char kCopyAgain[] = "copy it again from where it was prepared, or prepare the data set again";

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

// The shards among `paths` that a manifest governs, by place of `location`, with the manifest's entry of
// each.
struct GovernedShards {
  std::string manifest_path, manifest_text;
  ShardManifest manifest;
  std::vector<std::pair<size_t, size_t>> shards;  // (index into paths, index into manifest.shards)
};

// The rule on names: every directory among the places that holds .h5 shards among `paths`, and the directory
// of every .h5 shard named directly when it has a manifest or an unfinished prep, must have a manifest that
// lists each of them and, for a directory, misses none of its `split`.
absl::StatusOr<std::vector<GovernedShards>> governed_shards(const std::string& location,
                                                            std::string_view split,
                                                            const std::vector<std::string>& paths) {
  std::vector<GovernedShards> governed;
  const std::vector<std::string> places = absl::StrSplit(location, ',', absl::SkipEmpty());
  for (const std::string& place : places) {
    std::error_code error;
    const bool directory_place = fs::is_directory(place, error);
    // The shards that this place contributed.
    std::vector<size_t> here;
    for (size_t i = 0; i < paths.size(); ++i) {
      const fs::path path(paths[i]);
      if (path.extension() != ".h5") continue;
      if (directory_place ? same_directory(path.parent_path(), place) : same_directory(path, place))
        here.push_back(i);
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
    GovernedShards& found = governed.emplace_back();
    found.manifest_path = manifest_path.string();
    NANOFORGE_ASSIGN_OR_RETURN(found.manifest_text, read_small_file(found.manifest_path));
    NANOFORGE_ASSIGN_OR_RETURN(found.manifest,
                               ShardManifest::parse(found.manifest_text, found.manifest_path));
    std::map<std::string, size_t> listed;
    for (size_t entry = 0; entry < found.manifest.shards.size(); ++entry) {
      const ManifestShard& shard = found.manifest.shards[entry];
      if (split.empty() || shard.split() == split || !directory_place) listed[shard.name] = entry;
    }
    std::map<std::string, bool> seen;
    for (const size_t i : here) {
      const std::string name = fs::path(paths[i]).filename().string();
      const auto entry = listed.find(name);
      if (entry == listed.end()) {
        return absl::FailedPreconditionError(fmt::format(
            "{} is not in {}: the prep that made this data set did not write it; remove it, or prepare the "
            "data set again",
            paths[i], found.manifest_path));
      }
      found.shards.emplace_back(i, entry->second);
      seen[name] = true;
    }
    if (directory_place) {
      for (const auto& [name, entry] : listed) {
        if (!seen.count(name)) {
          return absl::DataLossError(fmt::format(
              "{} lists {}, which is missing: the data set is incomplete; restore the file or prepare the "
              "data set again",
              found.manifest_path, (directory / name).string()));
        }
      }
    }
  }
  return governed;
}

// The CRC-32 of each file, the files spread over the cores (checksum_file splits a file of more than
// 128 MiB further).
std::vector<absl::StatusOr<FileChecksum>> checksum_files(const std::vector<std::string>& paths) {
  std::vector<absl::StatusOr<FileChecksum>> results(paths.size(), FileChecksum{});
  std::atomic<size_t> next{0};
  const size_t workers = std::min<size_t>(paths.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < paths.size(); i = next++)
        results[i] = checksum_file(paths[i]);
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  return results;
}

// The format version its first line names (1 or kShardManifestVersion).
absl::StatusOr<int> manifest_format_version(const std::string& first, const std::string& source) {
  if (first == fmt::format("{} 1", kFormatName)) return 1;
  if (first == fmt::format("{} {}", kFormatName, kShardManifestVersion)) return kShardManifestVersion;
  if (first.starts_with(fmt::format("{} ", kFormatName))) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: shard manifest format {}; this nanoforge reads formats 1 to {} (written by a newer nanoforge: "
        "update it)",
        source, first.substr(sizeof(kFormatName), 20), kShardManifestVersion));
  }
  return absl::DataLossError(
      fmt::format("{}: not a nanoforge shard manifest (its first line is not \"{} {}\")", source, kFormatName,
                  kShardManifestVersion));
}

// The last line (format 2) is the checksum of every byte above it: any edit or damage is refused here.
absl::Status check_manifest_checksum(std::string_view text, const std::string& source) {
  const std::string prefix = fmt::format("{} ", kChecksumKey);
  const size_t last_line = text.ends_with('\n') ? text.rfind('\n', text.size() - 2) + 1 : 0;
  const std::string_view last = text.substr(last_line);
  if (last_line == 0 || !last.starts_with(prefix)) {
    return absl::DataLossError(fmt::format(
        "{}: its last line is not its {}: it was cut short, damaged or edited after prep wrote it; {}",
        source, kChecksumKey, kPrepareAgain));
  }
  const std::string computed = fmt::format("{:016x}", fnv1a64(text.substr(0, last_line)));
  const std::string_view stored = last.substr(prefix.size(), last.size() - prefix.size() - 1);
  if (stored != computed) {
    return absl::DataLossError(fmt::format(
        "{}: its {} is {} but the lines above it give {}: it was damaged or edited after prep wrote it; {}",
        source, kChecksumKey, stored.substr(0, 32), computed, kPrepareAgain));
  }
  return absl::OkStatus();
}

template <typename Number>
bool parse_number(const std::string& word, Number& out) {
  return absl::SimpleAtoi(word, &out);
}

template <typename Number>
bool parse_hex_number(const std::string& word, Number& out) {
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), out, 16);
  return !word.empty() && error == std::errc() && end == word.data() + word.size();
}

// "name bytes crc32 documents tokens token_checksum"; false when damaged.
bool parse_shard_line(const std::vector<std::string>& words, ManifestShard& shard) {
  const bool ok = words.size() == 6 && fs::path(words[0]).filename() == words[0] &&
                  parse_number(words[1], shard.bytes) && parse_hex_number(words[2], shard.crc32) &&
                  parse_number(words[3], shard.documents) && parse_number(words[4], shard.tokens) &&
                  parse_hex_number(words[5], shard.token_checksum);
  shard.name = words[0];
  return ok;
}

// One `key value` line after the first into `manifest`; false when it is damaged or its key unknown.
bool parse_manifest_line(const std::string& key, const std::string& value, ShardManifest& manifest) {
  if (key == "tokenizer_hash") {
    manifest.tokenizer_hash = value;
    return true;
  }
  const std::pair<const char*, std::string*> texts[] = {{"text_split", &manifest.text_split},
                                                        {"text_column", &manifest.text_column},
                                                        {"command", &manifest.command_line}};
  for (const auto& [name, field] : texts) {
    if (key == name) {
      *field = unescape(value);
      return true;
    }
  }
  if (key == "vocab_size") return parse_number(value, manifest.vocab_size);
  if (key == "bos_id") return parse_number(value, manifest.bos_id);
  if (key == "shard_tokens") return parse_number(value, manifest.shard_tokens);
  if (key == "val_docs") return parse_number(value, manifest.val_docs);
  if (key == "input_documents") return parse_number(value, manifest.input_documents);
  if (key == "input_documents_hash") return parse_hex_number(value, manifest.input_documents_hash);
  if (key == "empty_documents") return parse_number(value, manifest.empty_documents);
  if (key == "text_bytes") return parse_number(value, manifest.text_bytes);
  if (key == "input") {
    manifest.inputs.push_back(unescape(value));
    return true;
  }
  const std::vector<std::string> words = absl::StrSplit(value, ' ');
  if (key == "split") return words.size() == 7;  // derived from the shards; checked by check_manifest_totals
  if (key == "shard") {
    ManifestShard shard;
    const bool ok = parse_shard_line(words, shard);
    manifest.shards.push_back(std::move(shard));
    return ok;
  }
  return key == kChecksumKey;  // checked by check_manifest_checksum
}

// The totals a parsed manifest states agree with its shards and with the text it was parsed from.
absl::Status check_manifest_totals(const ShardManifest& manifest, std::string_view text,
                                   const std::string& source) {
  // The split lines must say what the shards add up to: a manifest cut or edited by hand is refused.
  if (manifest.to_text() != std::string(text)) {
    return absl::DataLossError(fmt::format(
        "{}: its totals do not match its shards, or it is not as prep writes it: it was damaged or "
        "edited; {}",
        source, kPrepareAgain));
  }
  // Every input document read is in a shard or was empty (format 1 has no checksum to catch an edit).
  int64_t in_shards = 0;
  for (const ManifestShard& shard : manifest.shards)
    in_shards += shard.documents;
  if (manifest.input_documents != in_shards + manifest.empty_documents) {
    return absl::DataLossError(fmt::format(
        "{}: input_documents {} is not the documents of its shards ({}) plus empty_documents ({}): it was "
        "damaged or edited; {}",
        source, manifest.input_documents, in_shards, manifest.empty_documents, kPrepareAgain));
  }
  return absl::OkStatus();
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
  std::string text = fmt::format("{} {}\n", kFormatName, format_version);
  text += fmt::format("tokenizer_hash {}\nvocab_size {}\nbos_id {}\n", tokenizer_hash, vocab_size, bos_id);
  text += fmt::format("shard_tokens {}\nval_docs {}\n", shard_tokens, val_docs);
  text += fmt::format("text_split {}\ntext_column {}\n", escape(text_split), escape(text_column));
  text += fmt::format("command {}\n", escape(command_line));
  for (const std::string& input : inputs)
    text += fmt::format("input {}\n", escape(input));
  text += fmt::format("input_documents {}\n", input_documents);
  if (format_version >= 2) text += fmt::format("input_documents_hash {:016x}\n", input_documents_hash);
  text += fmt::format("empty_documents {}\ntext_bytes {}\n", empty_documents, text_bytes);
  for (const char* split : {"val", "train"}) {
    text += fmt::format("split {} documents {} tokens {} shards {}\n", split, documents(split), tokens(split),
                        shard_count(split));
  }
  for (const ManifestShard& shard : shards) {
    text += fmt::format("shard {} {} {:08x} {} {} {:016x}\n", shard.name, shard.bytes, shard.crc32,
                        shard.documents, shard.tokens, shard.token_checksum);
  }
  if (format_version >= 2) text += fmt::format("{} {:016x}\n", kChecksumKey, fnv1a64(text));
  return text;
}

absl::StatusOr<ShardManifest> ShardManifest::parse(std::string_view text, const std::string& source) {
  const std::vector<std::string> lines = absl::StrSplit(std::string(text), '\n', absl::SkipEmpty());
  ShardManifest manifest;
  NANOFORGE_ASSIGN_OR_RETURN(manifest.format_version,
                             manifest_format_version(lines.empty() ? "" : lines.front(), source));
  if (manifest.format_version >= 2) NANOFORGE_RETURN_IF_ERROR(check_manifest_checksum(text, source));
  for (size_t n = 1; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const size_t space = line.find(' ');
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (!parse_manifest_line(line.substr(0, space), value, manifest))
      return absl::DataLossError(fmt::format("{}: line {} is damaged: {}", source, n + 1, line));
  }
  NANOFORGE_RETURN_IF_ERROR(check_manifest_totals(manifest, text, source));
  return manifest;
}

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t fold_document_hash(uint64_t running, uint64_t document_hash) {
  char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(document_hash >> (8 * i));
  return fnv1a64({bytes, sizeof(bytes)}, running);
}

std::string manifest_hash(std::string_view manifest_text) {
  return fmt::format("{:016x}", fnv1a64(manifest_text));
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

absl::StatusOr<int64_t> check_shard_files(const std::string& location, std::string_view split,
                                          const std::vector<std::string>& files) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<GovernedShards> governed,
                             governed_shards(location, split, files));
  std::vector<std::string> paths;
  std::vector<std::pair<const GovernedShards*, const ManifestShard*>> listed;
  for (const GovernedShards& place : governed) {
    for (const auto& [file, entry] : place.shards) {
      std::error_code error;
      const auto bytes = static_cast<int64_t>(fs::file_size(files[file], error));
      if (!error && bytes != place.manifest.shards[entry].bytes) {
        return absl::DataLossError(fmt::format(
            "{}: {} bytes, but {} lists it with {}: it changed after prep wrote it (a partial copy?); {}",
            files[file], bytes, place.manifest_path, place.manifest.shards[entry].bytes, kCopyAgain));
      }
      paths.push_back(files[file]);
      listed.emplace_back(&place, &place.manifest.shards[entry]);
    }
  }
  const std::vector<absl::StatusOr<FileChecksum>> checksums = checksum_files(paths);
  for (size_t i = 0; i < paths.size(); ++i) {
    NANOFORGE_RETURN_IF_ERROR(checksums[i].status());
    const auto& [place, entry] = listed[i];
    if (checksums[i]->bytes != entry->bytes || checksums[i]->crc32 != entry->crc32) {
      return absl::DataLossError(fmt::format(
          "{}: CRC-32 {:08x}, but {} lists {:08x}: its bytes changed after prep wrote it (damage on disk or "
          "in a copy, or an edit); {}",
          paths[i], checksums[i]->crc32, place->manifest_path, entry->crc32, kCopyAgain));
    }
  }
  return static_cast<int64_t>(paths.size());
}

absl::StatusOr<std::string> check_shard_manifests(const std::string& location, std::string_view split,
                                                  const ShardSet& set) {
  std::vector<std::string> paths;
  for (int64_t i = 0; i < set.shard_count(); ++i)
    paths.push_back(set.shard(i).path());
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<GovernedShards> governed,
                             governed_shards(location, split, paths));
  std::vector<std::string> hashes;
  for (const GovernedShards& place : governed) {
    for (const auto& [file, entry] : place.shards) {
      NANOFORGE_RETURN_IF_ERROR(check_shard(set.shard(static_cast<int64_t>(file)),
                                            place.manifest.shards[entry], place.manifest_path,
                                            place.manifest));
    }
    hashes.push_back(manifest_hash(place.manifest_text));
  }
  return fmt::format("{}", fmt::join(hashes, ","));
}

}  // namespace nanoforge
