// prep_shards: documents in reading order become BOS + their ids, the first val_docs in val shards and the
// rest in train shards of about shard_tokens tokens; the output does not depend on the thread count; bad
// input, and an --out holding anything but prep's own files, are refused before anything lands under a final
// name. `nanoforge prep` without --tokenizer and --out reads and writes under $NANOFORGE_BASE_DIR.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <map>

#include "data/prep/prep.h"
#include "data/shards/shard.h"
#include "data/shards/shard_set.h"
#include "tests/data/tokenizer/tokenizer_test_util.h"
#include "tests/program_run.h"

namespace nanoforge {
namespace {

using testing::fresh_temp_dir;
using testing::golden_dir;
using testing::read_file;
using testing::write_file;

Tokenizer golden_tokenizer() {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(golden_dir());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(*tokenizer);
}

// Paragraph documents "document N ..." of varied lengths.
std::vector<std::string> make_documents(int count) {
  std::vector<std::string> documents;
  for (int i = 0; i < count; ++i) {
    std::string text = "Document " + std::to_string(i) + ":";
    for (int w = 0; w < 5 + (i * 7) % 40; ++w)
      text += " word" + std::to_string((i * 31 + w) % 97);
    documents.push_back(text);
  }
  return documents;
}

std::string as_paragraphs(const std::vector<std::string>& documents) {
  std::string text;
  for (const std::string& document : documents)
    text += document + "\n\n";
  return text;
}

// All tokens of the shards of `split` under dir, in order.
std::vector<int32_t> split_tokens(const std::string& dir, const std::string& split,
                                  int64_t* documents = nullptr) {
  auto files = list_shard_files(dir, split);
  EXPECT_TRUE(files.ok()) << files.status();
  auto shards = ShardSet::open(*files, ShardOpenOptions{});
  EXPECT_TRUE(shards.ok()) << shards.status();
  std::vector<int32_t> tokens;
  for (int64_t s = 0; s < (*shards)->shard_count(); ++s) {
    const TokenShard& shard = (*shards)->shard(s);
    for (int64_t d = 0; d < shard.doc_count(); ++d) {
      std::vector<int32_t> doc(static_cast<size_t>(shard.doc_length(d)));
      EXPECT_TRUE(shard.copy_document_prefix(d, shard.doc_length(d), doc.data()).ok());
      tokens.insert(tokens.end(), doc.begin(), doc.end());
    }
  }
  if (documents != nullptr) *documents = (*shards)->doc_count();
  return tokens;
}

TEST(Prep, WritesBosPlusIdsInOrderSplitIntoValAndTrainShards) {
  const Tokenizer tokenizer = golden_tokenizer();
  const std::string dir = fresh_temp_dir("prep_order");
  const std::vector<std::string> documents = make_documents(300);
  write_file(dir + "/input.txt", as_paragraphs(documents));
  PrepOptions options;
  options.inputs = {dir + "/input.txt"};
  options.out_dir = dir + "/shards";
  options.shard_tokens = 2000;  // several train shards
  options.val_docs = 20;
  absl::StatusOr<PrepResult> result = prep_shards(tokenizer, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->val_docs, 20);
  EXPECT_EQ(result->train_docs, 280);
  EXPECT_GT(result->shards.size(), 3u);

  std::vector<int32_t> expected_val, expected_train;
  for (size_t i = 0; i < documents.size(); ++i) {
    std::vector<int32_t>& target = i < 20 ? expected_val : expected_train;
    target.push_back(tokenizer.bos_id());
    tokenizer.encode(documents[i], target);
  }
  int64_t val_documents = 0, train_documents = 0;
  EXPECT_EQ(split_tokens(options.out_dir, "val", &val_documents), expected_val);
  EXPECT_EQ(split_tokens(options.out_dir, "train", &train_documents), expected_train);
  EXPECT_EQ(val_documents, 20);
  EXPECT_EQ(train_documents, 280);
  EXPECT_EQ(result->train_tokens, static_cast<int64_t>(expected_train.size()));
  for (const auto& entry : std::filesystem::directory_iterator(options.out_dir)) {
    if (entry.path().filename() == "manifest.txt") continue;     // published last (test_prep_resume.cpp)
    EXPECT_EQ(entry.path().extension(), ".h5") << entry.path();  // no temporary file left behind
  }
}

TEST(Prep, OutputDoesNotDependOnTheThreadCount) {
  const Tokenizer tokenizer = golden_tokenizer();
  const std::string dir = fresh_temp_dir("prep_threads");
  write_file(dir + "/input.txt", as_paragraphs(make_documents(500)));
  std::vector<std::string> outputs;
  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    PrepOptions options;
    options.inputs = {dir + "/input.txt"};
    options.out_dir = dir + "/out" + std::to_string(threads);
    options.val_docs = 10;
    ASSERT_TRUE(prep_shards(tokenizer, options).ok());
    outputs.push_back(read_file(options.out_dir + "/train_00000.h5"));
  }
  omp_set_num_threads(saved_threads);
  EXPECT_EQ(outputs[0], outputs[1]);
  EXPECT_EQ(outputs[0], outputs[2]);
}

TEST(Prep, EmptyInputAndTooManyValDocumentsAreRefused) {
  const Tokenizer tokenizer = golden_tokenizer();
  const std::string dir = fresh_temp_dir("prep_errors");
  write_file(dir + "/empty.txt", "\n\n\n");
  PrepOptions options;
  options.inputs = {dir + "/empty.txt"};
  options.out_dir = dir + "/shards";
  absl::StatusOr<PrepResult> empty = prep_shards(tokenizer, options);
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no documents"), std::string::npos) << empty.status();

  write_file(dir + "/small.txt", as_paragraphs(make_documents(5)));
  options.inputs = {dir + "/small.txt"};
  options.val_docs = 5;
  absl::StatusOr<PrepResult> all_val = prep_shards(tokenizer, options);
  EXPECT_FALSE(all_val.ok());
  EXPECT_NE(all_val.status().message().find("--val-docs"), std::string::npos) << all_val.status();
  EXPECT_FALSE(std::filesystem::exists(options.out_dir + "/train_00000.h5"));
  EXPECT_FALSE(std::filesystem::exists(options.out_dir + "/val_00000.h5"));

  options.inputs = {dir + "/missing.txt"};
  EXPECT_FALSE(prep_shards(tokenizer, options).ok());
}

// The probe's `prep --out` over earlier shards overwrote them and mixed in stale ones of the earlier prep.
TEST(Prep, ExistingShardsAreRefusedOrDeletedWithOverwrite) {
  const Tokenizer tokenizer = golden_tokenizer();
  const std::string dir = fresh_temp_dir("prep_existing");
  write_file(dir + "/docs.txt", as_paragraphs(make_documents(40)));
  PrepOptions options;
  options.inputs = {dir + "/docs.txt"};
  options.out_dir = dir + "/shards";
  options.val_docs = 4;
  options.shard_tokens = 200;  // several train shards
  ASSERT_TRUE(prep_shards(tokenizer, options).ok());
  const std::string first = read_file(options.out_dir + "/train_00000.h5");
  write_file(options.out_dir + "/train_00099.h5", "a stale shard of an earlier prep");

  options.shard_tokens = 100000;  // one train shard this time
  absl::StatusOr<PrepResult> refused = prep_shards(tokenizer, options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(refused.status().message().find("add --overwrite"), std::string::npos) << refused.status();
  EXPECT_EQ(read_file(options.out_dir + "/train_00000.h5"), first) << "nothing may change";

  options.overwrite = true;
  absl::StatusOr<PrepResult> replaced = prep_shards(tokenizer, options);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_FALSE(std::filesystem::exists(options.out_dir + "/train_00099.h5"));
  EXPECT_FALSE(std::filesystem::exists(options.out_dir + "/train_00001.h5"));
  EXPECT_EQ(*list_shard_files(options.out_dir, "train"),
            std::vector<std::string>{options.out_dir + "/train_00000.h5"});

  write_file(options.out_dir + "/fineweb_train_000001.bin", "another tool's shard");
  absl::StatusOr<PrepResult> foreign = prep_shards(tokenizer, options);
  EXPECT_NE(foreign.status().message().find("it holds " + options.out_dir +
                                            "/fineweb_train_000001.bin, which nanoforge did not write"),
            std::string::npos)
      << foreign.status();
}

// The entries of a directory by name, with their bytes (a directory's as "<dir>").
std::map<std::string, std::string> directory_contents(const std::string& dir) {
  std::map<std::string, std::string> contents;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    contents[entry.path().filename().string()] =
        entry.is_directory() ? "<dir>" : read_file(entry.path().string());
  return contents;
}

// `prep --out data/loader` in a clone wrote shards beside data/loader/*.cpp, though its own error text asked
// for "an empty or new directory". Anything but prep's files is refused, to start, overwrite or resume.
TEST(Prep, ADirectoryHoldingOtherFilesIsRefusedInEveryModeAndLeftAsItWas) {
  const Tokenizer tokenizer = golden_tokenizer();
  const std::string dir = fresh_temp_dir("prep_foreign");
  write_file(dir + "/docs.txt", as_paragraphs(make_documents(40)));
  PrepOptions options;
  options.inputs = {dir + "/docs.txt"};
  options.out_dir = dir + "/loader";
  options.val_docs = 4;
  std::filesystem::create_directories(options.out_dir + "/include");
  write_file(options.out_dir + "/loader.cpp", "// source\n");
  const std::map<std::string, std::string> before = directory_contents(options.out_dir);
  for (const auto& [overwrite, resume] : {std::pair{false, false}, {true, false}, {false, true}}) {
    options.overwrite = overwrite;
    options.resume = resume;
    absl::StatusOr<PrepResult> refused = prep_shards(tokenizer, options);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
    EXPECT_NE(refused.status().message().find(
                  "--out " + options.out_dir + " is not a directory of prep's outputs: it holds " +
                  options.out_dir + "/include and 1 other entry that nanoforge did not write"),
              std::string::npos)
        << refused.status();
    EXPECT_NE(
        refused.status().message().find(
            "pick an empty or new directory, or drop --out for the default ($NANOFORGE_BASE_DIR/shards)"),
        std::string::npos)
        << refused.status();
    EXPECT_EQ(directory_contents(options.out_dir), before)
        << "overwrite " << overwrite << " resume " << resume;
  }
}

// Without --tokenizer and --out, prep reads BASE/tokenizer and writes BASE/shards, and nothing lands in the
// directory it runs in; with neither NANOFORGE_BASE_DIR nor HOME it says so.
TEST(PrepCommand, WithoutTokenizerAndOutTheBaseDirIsUsedAndNothingIsWrittenHere) {
  const std::string dir = fresh_temp_dir("prep_base_dir");
  std::filesystem::create_directories(dir + "/cwd");
  std::filesystem::create_directories(dir + "/base/tokenizer");
  for (const char* file : {Tokenizer::kRanksFile, Tokenizer::kSpecialsFile})
    std::filesystem::copy_file(golden_dir() + "/" + file, dir + "/base/tokenizer/" + file);
  write_file(dir + "/docs.txt", as_paragraphs(make_documents(40)));
  const std::string prep = std::string(test::nanoforge_binary()) + " prep --input " + dir +
                           "/docs.txt --val-docs 4 --threads 2 2>&1";
  const test::ProgramRun run =
      test::run_command("cd " + dir + "/cwd && NANOFORGE_BASE_DIR=" + dir + "/base " + prep);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/base/shards/manifest.txt")) << run.output;
  EXPECT_FALSE(split_tokens(dir + "/base/shards", "train").empty());
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/cwd"));

  const test::ProgramRun homeless = test::run_command("env -u HOME -u NANOFORGE_BASE_DIR " + prep);
  EXPECT_EQ(homeless.exit_code, 1) << homeless.output;
  EXPECT_NE(homeless.output.find("no --tokenizer given, and neither NANOFORGE_BASE_DIR nor HOME is set"),
            std::string::npos)
      << homeless.output;
}

// A document without text would be a shard document of BOS alone: nothing to learn, and a validation set of
// them made bits per byte infinite. prep skips them.
TEST(Prep, EmptyDocumentsAreSkipped) {
  const Tokenizer tokenizer = golden_tokenizer();
  const std::string dir = fresh_temp_dir("prep_empty_docs");
  write_file(dir + "/docs.jsonl",
             "{\"text\": \"one\"}\n{\"text\": \"\"}\n{\"text\": \"two\"}\n{\"text\": \"three\"}\n");
  PrepOptions options;
  options.inputs = {dir + "/docs.jsonl"};
  options.out_dir = dir + "/shards";
  options.val_docs = 1;
  absl::StatusOr<PrepResult> result = prep_shards(tokenizer, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->empty_docs, 1);
  EXPECT_EQ(result->val_docs + result->train_docs, 3);
  int64_t documents = 0;
  split_tokens(options.out_dir, "train", &documents);
  EXPECT_EQ(documents, 2);
}

}  // namespace
}  // namespace nanoforge
