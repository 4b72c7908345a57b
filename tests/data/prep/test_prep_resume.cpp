// A prep that did not finish is never a data set, and finishes exactly: killed with SIGKILL at several points
// (mid-shard, after a shard's rename before it is recorded, after it is recorded) or stopped by SIGTERM, its
// directory is refused by the loader (the probe's 134-of-360k-document data set that bench loader called
// verified) and `prep --resume` completes it with every shard byte for byte the uninterrupted prep's.
// The manifest's own checks: settings that changed refuse a resume; a shard added, removed or rewritten
// after prep, and a directory of shards without a manifest, are refused naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "data/prep/prep.h"
#include "data/shards/shard_manifest.h"
#include "data/shards/shard_set.h"
#include "data/shards/shard_writer.h"
#include "tests/data/tokenizer/tokenizer_test_util.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using testing::fresh_temp_dir;
using testing::golden_dir;
using testing::read_file;
using testing::write_file;

// 600 JSON-line documents of varied length, every 50th empty (skipped by prep, yet counted when resuming).
std::string corpus_lines() {
  std::string text;
  for (int i = 0; i < 600; ++i) {
    std::string document;
    if (i % 50 != 49) {
      document = "Document " + std::to_string(i) + ":";
      for (int w = 0; w < 5 + (i * 7) % 40; ++w)
        document += " word" + std::to_string((i * 31 + w) % 97);
    }
    text += "{\"text\": \"" + document + "\"}\n";
  }
  return text;
}

std::string prep_command(const std::string& input, const std::string& out, const std::string& extra = "") {
  return std::string(test::nanoforge_binary()) + " prep --input " + input + " --tokenizer " + golden_dir() +
         " --out " + out + " --val-docs 150 --shard-tokens 4000 --threads 2 " + extra + " 2>&1";
}

// Every file of a prep directory by name; the manifest without its command line (it names --out).
std::map<std::string, std::string> prep_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string bytes = read_file(entry.path().string());
    if (entry.path().filename() == kShardManifestName) {
      const size_t command = bytes.find("\ncommand ");
      bytes.erase(command, bytes.find('\n', command + 1) - command);
    }
    files[entry.path().filename().string()] = bytes;
  }
  return files;
}

// The loader's view of a directory: the train shards listed, opened and checked against the manifest.
absl::Status load_train_shards(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> files = list_split_shard_files(dir, "train");
  if (!files.ok()) return files.status();
  absl::StatusOr<std::shared_ptr<const ShardSet>> set = ShardSet::open(*files, {});
  if (!set.ok()) return set.status();
  return check_shard_manifests(dir, "train", **set).status();
}

TEST(PrepResume, KilledOrStoppedPrepIsRefusedThenResumedToTheUninterruptedShards) {
  const std::string dir = fresh_temp_dir("prep_resume");
  const std::string input = dir + "/corpus.jsonl";
  write_file(input, corpus_lines());
  const auto whole = run_command(prep_command(input, dir + "/whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::map<std::string, std::string> expected = prep_files(dir + "/whole");
  ASSERT_GE(expected.size(), 7u) << "two val shards and several train shards, and the manifest";
  ASSERT_TRUE(load_train_shards(dir + "/whole").ok()) << load_train_shards(dir + "/whole");

  // Documents are counted as appended by the interrupted process; shards as renamed into place (val first).
  for (const std::string fault : {"after_document@40", "after_shard@1", "after_record@2",
                                  "after_document@400", "after_shard@5", "term_after_document@300"}) {
    SCOPED_TRACE(fault);
    const std::string out = dir + "/" + fault.substr(0, fault.find('@')) + fault.substr(fault.find('@') + 1);
    const auto killed = run_command("NANOFORGE_PREP_FAULT=" + fault + " " + prep_command(input, out));
    EXPECT_NE(killed.exit_code, 0) << killed.output;
    EXPECT_FALSE(fs::exists(out + "/" + kShardManifestName));
    EXPECT_TRUE(fs::exists(out + "/" + kPrepJournalName));
    if (fault.starts_with("term_")) {
      EXPECT_NE(killed.output.find("stopped by a signal after"), std::string::npos) << killed.output;
      EXPECT_NE(killed.output.find("nanoforge prep --resume"), std::string::npos) << killed.output;
    }
    if (!list_split_shard_files(out, "train").ok()) {
      // No train shard yet: nothing a loader could pick up.
    } else {
      const absl::Status refused = load_train_shards(out);
      EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
      EXPECT_NE(refused.message().find("a prep that did not finish"), std::string::npos) << refused;
      EXPECT_NE(refused.message().find("nanoforge prep --resume"), std::string::npos) << refused;
    }
    const bool first = fault == "after_document@40";
    if (first) {
      const auto without_resume = run_command(prep_command(input, out));
      EXPECT_NE(without_resume.exit_code, 0);
      EXPECT_NE(without_resume.output.find("add --resume to continue it"), std::string::npos)
          << without_resume.output;
    }
    const auto resumed = run_command(prep_command(input, out, "--resume"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(prep_files(out), expected) << "every shard and the manifest, byte for byte";
    EXPECT_TRUE(load_train_shards(out).ok()) << load_train_shards(out);
    if (first) {
      const auto again = run_command(prep_command(input, out, "--resume"));
      EXPECT_EQ(again.exit_code, 0) << again.output;
      EXPECT_NE(again.output.find("is complete already"), std::string::npos) << again.output;
    }
  }
  // What the probe ran: bench loader on a killed prep's directory.
  const std::string killed = dir + "/for_bench";
  run_command("NANOFORGE_PREP_FAULT=after_record@4 " + prep_command(input, killed));
  const auto bench = run_command(std::string(test::nanoforge_binary()) + " bench loader --data " + killed +
                                 " --batch 2 --seq 32 2>&1");
  EXPECT_NE(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("a prep that did not finish"), std::string::npos) << bench.output;
}

// An in-process prep stopped after `documents` documents (the signal's path, without a signal).
void stopped_prep(const Tokenizer& tokenizer, PrepOptions options, int documents) {
  int asked = 0;
  options.stop_requested = [&] { return ++asked > documents; };
  const absl::StatusOr<PrepResult> stopped = prep_shards(tokenizer, options);
  ASSERT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
}

TEST(PrepResume, ChangedSettingsOrInputAreRefused) {
  const absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(golden_dir());
  ASSERT_TRUE(tokenizer.ok());
  const std::string dir = fresh_temp_dir("prep_resume_changed");
  write_file(dir + "/corpus.jsonl", corpus_lines());
  PrepOptions options;
  options.inputs = {dir + "/corpus.jsonl"};
  options.out_dir = dir + "/out";
  options.shard_tokens = 4000;
  options.val_docs = 150;
  stopped_prep(*tokenizer, options, 300);
  options.resume = true;
  PrepOptions other_size = options;
  other_size.shard_tokens = 5000;
  absl::StatusOr<PrepResult> refused = prep_shards(*tokenizer, other_size);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("--shard-tokens: 4000 then, 5000 now"), std::string::npos)
      << refused.status();
  write_file(dir + "/corpus.jsonl", corpus_lines() + "{\"text\": \"one more\"}\n");
  refused = prep_shards(*tokenizer, options);
  EXPECT_NE(refused.status().message().find("the input files"), std::string::npos) << refused.status();
  EXPECT_FALSE(fs::exists(options.out_dir + "/" + kShardManifestName));
}

TEST(ShardManifest, ShardsThatDisagreeWithTheManifestOrHaveNoneAreRefusedNamingTheFile) {
  const absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(golden_dir());
  ASSERT_TRUE(tokenizer.ok());
  const std::string dir = fresh_temp_dir("prep_manifest_checks");
  write_file(dir + "/corpus.jsonl", corpus_lines());
  PrepOptions options;
  options.inputs = {dir + "/corpus.jsonl"};
  options.out_dir = dir + "/out";
  options.shard_tokens = 4000;
  options.val_docs = 150;
  ASSERT_TRUE(prep_shards(*tokenizer, options).ok());
  const std::string out = options.out_dir;
  auto expect_refused = [&](const std::string& fragment) {
    const absl::Status status = load_train_shards(out);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find(fragment), std::string::npos) << fragment << " not in " << status;
  };
  // A shard of another prep put in its place (same name, other documents).
  fs::rename(out + "/train_00001.h5", dir + "/kept.h5");
  {
    auto writer = ShardWriter::create(out + "/train_00001.h5",
                                      {tokenizer->vocab_size(), tokenizer->bos_id(), tokenizer->hash()});
    ASSERT_TRUE(writer->append_document(tokenizer->encode("another data set")).ok());
    ASSERT_TRUE(writer->finish().ok());
  }
  expect_refused(out + "/train_00001.h5 disagrees with " + out + "/manifest.txt");
  fs::remove(out + "/train_00001.h5");
  expect_refused("lists " + out + "/train_00001.h5, which is missing");
  fs::rename(dir + "/kept.h5", out + "/train_00001.h5");
  EXPECT_TRUE(load_train_shards(out).ok());
  fs::copy_file(out + "/train_00001.h5", out + "/train_00099.h5");
  expect_refused(out + "/train_00099.h5 is not in " + out + "/manifest.txt");
  fs::remove(out + "/train_00099.h5");
  // A prep written before manifests: the message says how to make it usable.
  fs::remove(out + "/manifest.txt");
  expect_refused("token shards without a manifest.txt");
  expect_refused("--overwrite");
  // A shard file named on its own, from a directory that was never a prep's, is the user's choice.
  EXPECT_TRUE(
      check_shard_manifests(out + "/train_00000.h5", "train", **ShardSet::open({out + "/train_00000.h5"}, {}))
          .ok());
}

}  // namespace
}  // namespace nanoforge
