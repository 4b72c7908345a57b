// Compressed and streamed input: .jsonl.gz, .jsonl.zst (and compressed text files), several gzip members or
// zstd frames back to back, standard input (plain or compressed, recognised by its first bytes), glob
// patterns; and truncated or corrupt streams refused with the file named.
#include <gtest/gtest.h>

#include <cstdio>

#include "data/documents/documents.h"
#include "tests/data/documents/input_test_files.h"

namespace nanoforge {
namespace {

using testing::fresh_temp_dir;
using testing::gzip_bytes;
using testing::write_file;
using testing::zstd_bytes;

const std::string kJsonLines =
    "{\"text\": \"first \\u00e9 \\ud83d\\ude00 日本語\"}\n"
    "{\"text\": \"\"}\n"
    "\n"
    "{\"text\": \"second\\nline\", \"id\": 7}\n";
const std::vector<std::string> kTexts = {"first é 😀 日本語", "", "second\nline"};

// The texts of all documents, or the error's message as the only element.
std::vector<std::string> read_texts(const std::vector<std::string>& paths,
                                    TextSplit split = TextSplit::kParagraphs) {
  auto reader = DocumentReader::open(paths, split);
  if (!reader.ok()) return {"ERROR " + std::string(reader.status().message())};
  std::vector<std::string> texts;
  Document document;
  while (true) {
    auto got = reader->next(document);
    if (!got.ok()) return {"ERROR " + std::string(got.status().message())};
    if (!*got) break;
    texts.push_back(document.text);
  }
  if (paths != std::vector<std::string>{"-"}) {
    EXPECT_EQ(reader->bytes_read(), reader->total_bytes());
  }
  return texts;
}

// Reads "-" with standard input taken from `path`.
std::vector<std::string> read_stdin_from(const std::string& path) {
  EXPECT_NE(std::freopen(path.c_str(), "rb", stdin), nullptr);
  std::vector<std::string> texts = read_texts({"-"});
  std::clearerr(stdin);
  return texts;
}

TEST(CompressedDocuments, GzipAndZstdReadLikeThePlainFile) {
  const std::string dir = fresh_temp_dir("compressed");
  write_file(dir + "/a.jsonl", kJsonLines);
  write_file(dir + "/a.jsonl.gz", gzip_bytes(kJsonLines));
  write_file(dir + "/a.JSONL.ZST", zstd_bytes(kJsonLines));
  EXPECT_EQ(read_texts({dir + "/a.jsonl"}), kTexts);
  EXPECT_EQ(read_texts({dir + "/a.jsonl.gz"}), kTexts);
  EXPECT_EQ(read_texts({dir + "/a.JSONL.ZST"}), kTexts);
  // Text files too, and lines that straddle the read blocks of the decompressor.
  const std::string text = "para one\nstill one\n\n" + std::string(3 << 20, 'x') + "\n\nlast";
  write_file(dir + "/b.txt.zst", zstd_bytes(text));
  write_file(dir + "/b.md.gz", gzip_bytes(text));
  const std::vector<std::string> paragraphs = {"para one\nstill one", std::string(3 << 20, 'x'), "last"};
  EXPECT_EQ(read_texts({dir + "/b.txt.zst"}), paragraphs);
  EXPECT_EQ(read_texts({dir + "/b.md.gz"}, TextSplit::kWholeFile), std::vector<std::string>{text});
}

TEST(CompressedDocuments, ConcatenatedMembersAndFramesAreOneStream) {
  const std::string dir = fresh_temp_dir("concatenated");
  const std::string first = "{\"text\": \"one\"}\n{\"text\": \"tw", second = "o\"}\n{\"text\": \"three\"}\n";
  write_file(dir + "/c.jsonl.gz", gzip_bytes(first) + gzip_bytes(second));
  write_file(dir + "/c.jsonl.zst", zstd_bytes(first) + zstd_bytes(second));
  const std::vector<std::string> expected = {"one", "two", "three"};
  EXPECT_EQ(read_texts({dir + "/c.jsonl.gz"}), expected);
  EXPECT_EQ(read_texts({dir + "/c.jsonl.zst"}), expected);
}

TEST(CompressedDocuments, TruncatedOrCorruptStreamsNameTheFile) {
  const std::string dir = fresh_temp_dir("compressed_bad");
  std::string lines;
  for (int i = 0; i < 2000; ++i)
    lines += "{\"text\": \"document " + std::to_string(i * 7919) + "\"}\n";
  const std::string gz = gzip_bytes(lines), zst = zstd_bytes(lines);
  write_file(dir + "/cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  write_file(dir + "/cut.jsonl.zst", zst.substr(0, zst.size() / 2));
  std::string bad_gz = gz, bad_zst = zst;
  for (size_t i = 0; i < 64; ++i) {
    bad_gz[gz.size() / 2 + i] = static_cast<char>(0xff);
    bad_zst[zst.size() / 2 + i] = static_cast<char>(0xff);
  }
  write_file(dir + "/bad.jsonl.gz", bad_gz);
  write_file(dir + "/bad.jsonl.zst", bad_zst);
  write_file(dir + "/plain.jsonl.gz", lines);  // not compressed at all
  for (const std::string name : {"cut.jsonl.gz", "cut.jsonl.zst"}) {
    const std::string error = read_texts({dir + "/" + name}).front();
    EXPECT_NE(error.find("ERROR " + dir + "/" + name + ": the"), std::string::npos) << error;
    EXPECT_NE(error.find("is cut short"), std::string::npos) << error;
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  }
  for (const std::string name : {"bad.jsonl.gz", "bad.jsonl.zst", "plain.jsonl.gz"}) {
    const std::string error = read_texts({dir + "/" + name}).front();
    EXPECT_NE(error.find("ERROR " + dir + "/" + name + ": corrupt "), std::string::npos) << error;
  }
}

TEST(CompressedDocuments, StandardInputPlainOrCompressed) {
  const std::string dir = fresh_temp_dir("stdin");
  write_file(dir + "/a.jsonl", kJsonLines);
  write_file(dir + "/a.jsonl.gz", gzip_bytes(kJsonLines));
  write_file(dir + "/a.jsonl.zst", zstd_bytes(kJsonLines));
  write_file(dir + "/short", "{}");  // shorter than the zstd magic number: sniffing must not lose it
  EXPECT_EQ(read_stdin_from(dir + "/a.jsonl"), kTexts);
  EXPECT_EQ(read_stdin_from(dir + "/a.jsonl.gz"), kTexts);
  EXPECT_EQ(read_stdin_from(dir + "/a.jsonl.zst"), kTexts);
  const std::string error = read_stdin_from(dir + "/short").front();
  EXPECT_NE(error.find("standard input:1: the JSON object has no \"text\" field"), std::string::npos)
      << error;

  auto twice = expand_document_paths({"-", "-"});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("only once"), std::string::npos);
}

TEST(CompressedDocuments, GlobPatternsExpandToSortedInputFiles) {
  const std::string dir = fresh_temp_dir("globs");
  write_file(dir + "/shard_2.jsonl.zst", zstd_bytes("{\"text\": \"2\"}\n"));
  write_file(dir + "/shard_1.jsonl", "{\"text\": \"1\"}\n");
  write_file(dir + "/shard_3.csv", "not an input");
  auto paths = expand_document_paths({dir + "/shard_*"});
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(*paths, (std::vector<std::string>{dir + "/shard_1.jsonl", dir + "/shard_2.jsonl.zst"}));
  EXPECT_EQ(read_texts(*paths), (std::vector<std::string>{"1", "2"}));
  // A file first named by itself is not read again through its directory or a pattern.
  auto first = expand_document_paths({dir + "/shard_2.jsonl.zst", dir, dir + "/shard_*"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, (std::vector<std::string>{dir + "/shard_2.jsonl.zst", dir + "/shard_1.jsonl"}));
  auto none = expand_document_paths({dir + "/nothing_*.jsonl"});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("matches no input files"), std::string::npos) << none.status();
}

}  // namespace
}  // namespace nanoforge
