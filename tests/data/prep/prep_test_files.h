// What the tests of prep's directory share: a corpus of varied JSON-line documents, the prep command line
// that runs the program on it, a directory's files for byte-for-byte comparison, and the loader's view of a
// directory (its train shards opened and checked against the manifest).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "data/shards/shard_manifest.h"
#include "data/shards/shard_set.h"
#include "tests/data/tokenizer/tokenizer_test_util.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace nanoforge::testing {

// 600 JSON-line documents of varied length, every 50th empty (skipped by prep, yet counted when resuming);
// `word` makes another corpus of the same shape.
inline std::string corpus_lines(const std::string& word = "word") {
  std::string text;
  for (int i = 0; i < 600; ++i) {
    std::string document;
    if (i % 50 != 49) {
      document = "Document " + std::to_string(i) + ":";
      for (int w = 0; w < 5 + (i * 7) % 40; ++w)
        document += " " + word + std::to_string((i * 31 + w) % 97);
    }
    text += "{\"text\": \"" + document + "\"}\n";
  }
  return text;
}

inline std::string prep_command(const std::string& input, const std::string& out,
                                const std::string& extra = "") {
  return std::string(test::nanoforge_binary()) + " prep --input " + input + " --tokenizer " + golden_dir() +
         " --out " + out + " --val-docs 150 --shard-tokens 4000 --threads 2 " + extra + " 2>&1";
}

// Every file of a prep directory by name; the manifest without its command line (it names --out) and its
// checksum (of the lines, the command line included).
inline std::map<std::string, std::string> prep_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string bytes = read_file(entry.path().string());
    if (entry.path().filename() == kShardManifestName) {
      for (const std::string key : {"\ncommand ", "\nmanifest_checksum "}) {
        const size_t line = bytes.find(key);
        if (line != std::string::npos) bytes.erase(line, bytes.find('\n', line + 1) - line);
      }
    }
    files[entry.path().filename().string()] = bytes;
  }
  return files;
}

// The names of the files that differ between two prep_files() maps ("" when none): a readable failure.
inline std::string files_that_differ(const std::map<std::string, std::string>& got,
                                     const std::map<std::string, std::string>& expected) {
  std::string names;
  for (const auto& [name, bytes] : expected) {
    const auto found = got.find(name);
    if (found == got.end())
      names += name + " (missing) ";
    else if (found->second != bytes)
      names += name + " (differs) ";
  }
  for (const auto& [name, bytes] : got)
    if (!expected.count(name)) names += name + " (extra) ";
  return names;
}

// The loader's view of a directory: the train shards listed, opened and checked against the manifest.
inline absl::Status load_train_shards(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> files = list_split_shard_files(dir, "train");
  if (!files.ok()) return files.status();
  if (absl::StatusOr<int64_t> unchanged = check_shard_files(dir, "train", *files); !unchanged.ok())
    return unchanged.status();
  absl::StatusOr<std::shared_ptr<const ShardSet>> set = ShardSet::open(*files, {});
  if (!set.ok()) return set.status();
  return check_shard_manifests(dir, "train", **set).status();
}

}  // namespace nanoforge::testing
