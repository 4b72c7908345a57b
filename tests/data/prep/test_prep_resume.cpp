// A prep that did not finish is never a data set, and finishes exactly: killed with SIGKILL at several points
// (mid-shard, after a shard's rename before it is recorded, after it is recorded) or stopped by SIGTERM, its
// directory is refused by the loader (the probe's 134-of-360k-document data set that bench loader called
// verified) and `prep --resume` completes it with every shard byte for byte the uninterrupted prep's.
// The manifest's own checks: settings that changed refuse a resume; a shard added, removed or rewritten
// after prep, and a directory of shards without a manifest, are refused naming the file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "data/prep/prep.h"
#include "data/shards/shard_manifest.h"
#include "data/shards/shard_set.h"
#include "data/shards/shard_writer.h"
#include "tests/data/prep/prep_test_files.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using testing::corpus_lines;
using testing::files_that_differ;
using testing::fresh_temp_dir;
using testing::golden_dir;
using testing::load_train_shards;
using testing::prep_command;
using testing::prep_files;
using testing::read_file;
using testing::write_file;

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

// 3,300 JSON-line documents of about 1,000 bytes (3.3 MB): an input whose middle lies outside its first and
// last MiB.
std::string long_corpus_lines() {
  std::string text;
  for (int i = 0; i < 3300; ++i) {
    std::string document = "Document " + std::to_string(i) + ":";
    while (document.size() < 1000)
      document += " word" + std::to_string((i * 31 + static_cast<int>(document.size())) % 97);
    text += "{\"text\": \"" + document + "\"}\n";
  }
  return text;
}

// `bytes` written to `path` with the modification time `mtime` set back.
void write_with_mtime(const std::string& path, const std::string& bytes, const timespec& mtime) {
  write_file(path, bytes);
  const timespec times[2] = {mtime, mtime};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(PrepResume, InputChangedUnderTheSameSizeAndModificationTimeIsRefusedWhereItMatters) {
  const absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(golden_dir());
  ASSERT_TRUE(tokenizer.ok());
  const std::string dir = fresh_temp_dir("prep_resume_same_size");
  const std::string input = dir + "/corpus.jsonl";
  const std::string original = long_corpus_lines();
  write_file(input, original);
  struct stat written {};
  ASSERT_EQ(stat(input.c_str(), &written), 0);
  PrepOptions options;
  options.inputs = {input};
  options.out_dir = dir + "/stopped";
  options.shard_tokens = 60000;
  options.val_docs = 100;
  stopped_prep(*tokenizer, options, 1700);
  // The input the recorded shards were made of: its first `consumed_bytes`.
  const absl::StatusOr<ShardManifest> journal =
      ShardManifest::parse(read_file(options.out_dir + "/" + kPrepJournalName), "journal");
  ASSERT_TRUE(journal.ok()) << journal.status();
  size_t consumed_bytes = 0;
  for (int64_t line = 0; line < journal->input_documents; ++line)
    consumed_bytes = original.find('\n', consumed_bytes) + 1;
  constexpr size_t kMiB = 1 << 20;
  ASSERT_GT(consumed_bytes, kMiB + 20000);
  ASSERT_LT(consumed_bytes + 20000, original.size() - kMiB);

  struct Change {
    std::string where;
    size_t offset;
    std::string refusal;  // "" when the resume goes on
  };
  for (const Change& change : std::vector<Change>{
           {"first MiB", 5000, input + ": its first or last MiB changed"},
           {"last MiB", original.size() - 5000, input + ": its first or last MiB changed"},
           {"middle, in a document the recorded shards hold", kMiB + 10000, "the documents read again"},
           {"middle, after the documents the recorded shards hold", consumed_bytes + 10000, ""}}) {
    SCOPED_TRACE("a letter changed in the " + change.where);
    std::string changed = original;
    changed[changed.find(" word", change.offset) + 2] = 'a';
    write_with_mtime(input, changed, written.st_mtim);
    PrepOptions resume = options;
    resume.out_dir = dir + "/resumed_" + std::to_string(change.offset);
    fs::copy(options.out_dir, resume.out_dir);
    resume.resume = true;
    const absl::StatusOr<PrepResult> resumed = prep_shards(*tokenizer, resume);
    if (change.refusal.empty()) {
      ASSERT_TRUE(resumed.ok()) << resumed.status();
      PrepOptions uninterrupted = options;
      uninterrupted.out_dir = dir + "/uninterrupted_" + std::to_string(change.offset);
      ASSERT_TRUE(prep_shards(*tokenizer, uninterrupted).ok());
      EXPECT_EQ(files_that_differ(prep_files(resume.out_dir), prep_files(uninterrupted.out_dir)), "")
          << "the uninterrupted prep of the input as it is now";
    } else {
      EXPECT_EQ(resumed.status().code(), absl::StatusCode::kFailedPrecondition) << resumed.status();
      EXPECT_NE(resumed.status().message().find(change.refusal), std::string::npos) << resumed.status();
      EXPECT_NE(resumed.status().message().find("--overwrite"), std::string::npos) << resumed.status();
      EXPECT_FALSE(fs::exists(resume.out_dir + "/" + kShardManifestName));
    }
    write_with_mtime(input, original, written.st_mtim);
  }
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
  expect_refused(out + "/train_00001.h5: ");
  expect_refused(" bytes, but " + out + "/manifest.txt lists it with ");
  // eval and bench loader compare the opened shard's header (the size first).
  const absl::StatusOr<std::shared_ptr<const ShardSet>> replaced =
      ShardSet::open({out + "/train_00001.h5"}, {});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_NE(check_shard_manifests(out + "/train_00001.h5", "train", **replaced)
                .status()
                .message()
                .find(out + "/train_00001.h5 disagrees with " + out + "/manifest.txt"),
            std::string::npos);
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
