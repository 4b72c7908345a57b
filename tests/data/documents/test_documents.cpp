// The input-document reader: JSON lines and text files (paragraphs or whole files), directories, and errors
// that name the file and line.
#include <gtest/gtest.h>

#include "data/documents/documents.h"
#include "tests/data/tokenizer/tokenizer_test_util.h"

namespace nanoforge {
namespace {

using testing::fresh_temp_dir;
using testing::write_file;

std::vector<Document> read_all(const std::vector<std::string>& paths,
                               TextSplit split = TextSplit::kParagraphs) {
  auto reader = DocumentReader::open(paths, split);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<Document> documents;
  Document document;
  while (true) {
    auto got = reader->next(document);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !*got) break;
    documents.push_back(document);
  }
  EXPECT_EQ(reader->bytes_read(), reader->total_bytes());
  return documents;
}

std::string read_error(const std::string& path) {
  auto reader = DocumentReader::open({path});
  if (!reader.ok()) return std::string(reader.status().message());
  Document document;
  while (true) {
    auto got = reader->next(document);
    if (!got.ok()) return std::string(got.status().message());
    if (!*got) return "";
  }
}

std::vector<std::string> texts(const std::vector<Document>& documents) {
  std::vector<std::string> out;
  for (const Document& document : documents)
    out.push_back(document.text);
  return out;
}

TEST(TokenizerInputDocuments, ReadsJsonLinesTextFieldsWithEscapes) {
  const std::string dir = fresh_temp_dir("docs_jsonl");
  write_file(dir + "/a.jsonl",
             "{\"id\": 1, \"text\": \"first\\nline \\u00e9 \\ud83d\\ude00\"}\n"
             "\n"
             "  {\"text\": \"second\", \"meta\": {\"x\": [1, 2]}}  \r\n"
             "{\"text\": \"\"}\n"
             "{\"text\": \"no newline at end\"}");
  const std::vector<Document> documents = read_all({dir + "/a.jsonl"});
  EXPECT_EQ(texts(documents),
            (std::vector<std::string>{"first\nline é 😀", "second", "", "no newline at end"}));
  EXPECT_EQ(documents[1].line, 3);
  EXPECT_EQ(documents[3].line, 5);
}

TEST(TokenizerInputDocuments, SplitsTextFilesIntoParagraphsOrWholeFiles) {
  const std::string dir = fresh_temp_dir("docs_text");
  const std::string text = "\n\nFirst paragraph\nstill first  \n\n \t \nSecond\r\nwith CRLF\r\n\r\nThird";
  write_file(dir + "/b.txt", text);
  const std::vector<Document> paragraphs = read_all({dir + "/b.txt"});
  EXPECT_EQ(texts(paragraphs),
            (std::vector<std::string>{"First paragraph\nstill first  ", "Second\r\nwith CRLF", "Third"}));
  EXPECT_EQ(paragraphs[0].line, 3);
  EXPECT_EQ(paragraphs[1].line, 7);
  EXPECT_EQ(texts(read_all({dir + "/b.txt"}, TextSplit::kWholeFile)), (std::vector<std::string>{text}));
  write_file(dir + "/c.md", "ends with newline\n");
  EXPECT_EQ(texts(read_all({dir + "/c.md"}, TextSplit::kWholeFile)),
            (std::vector<std::string>{"ends with newline\n"}));
  write_file(dir + "/empty.txt", "");
  EXPECT_TRUE(read_all({dir + "/empty.txt"}, TextSplit::kWholeFile).empty());
  EXPECT_TRUE(read_all({dir + "/empty.txt"}).empty());
}

TEST(TokenizerInputDocuments, ReadsLongLinesAcrossReadBlocks) {
  const std::string dir = fresh_temp_dir("docs_long");
  const std::string long_text(3 << 20, 'x');
  write_file(dir + "/long.jsonl", "{\"text\": \"" + long_text + "\"}\n{\"text\": \"short\"}\n");
  EXPECT_EQ(texts(read_all({dir + "/long.jsonl"})), (std::vector<std::string>{long_text, "short"}));
}

TEST(TokenizerInputDocuments, DirectoriesExpandToTheirInputFilesSorted) {
  const std::string dir = fresh_temp_dir("docs_dir");
  write_file(dir + "/b.txt", "B");
  write_file(dir + "/a.jsonl", "{\"text\": \"A\"}\n");
  write_file(dir + "/notes.csv", "ignored");
  auto paths = expand_document_paths({dir});
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(*paths, (std::vector<std::string>{dir + "/a.jsonl", dir + "/b.txt"}));
  const std::vector<Document> documents = read_all(*paths);
  EXPECT_EQ(texts(documents), (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(documents[1].file_index, 1u);

  auto unknown = expand_document_paths({dir + "/notes.csv"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("notes.csv: unknown kind"), std::string::npos);
  auto missing = expand_document_paths({dir + "/nope.jsonl"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.jsonl does not exist"), std::string::npos);
  const std::string empty_dir = fresh_temp_dir("docs_empty_dir");
  EXPECT_FALSE(expand_document_paths({empty_dir}).ok());
}

TEST(TokenizerInputDocuments, BadJsonLinesNameTheFileAndLine) {
  const std::string dir = fresh_temp_dir("docs_bad");
  const std::string good = "{\"text\": \"ok\"}\n";
  struct Case {
    std::string line;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"{\"text\": \"unterminated}", "not valid JSON"},    {"[\"text\"]", "expected a JSON object"},
      {"{\"body\": \"x\"}", "no \"text\" field"},          {"{\"text\": 42}", "\"text\" is not a string"},
      {"{\"text\": \"bad \xff utf8\"}", "not valid JSON"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir + "/bad" + std::to_string(i) + ".jsonl";
    write_file(path, good + "\n" + cases[i].line + "\n" + good);
    const std::string message = read_error(path);
    EXPECT_NE(message.find(path + ":3:"), std::string::npos) << message;
    EXPECT_NE(message.find(cases[i].expected), std::string::npos) << message;
  }
  EXPECT_FALSE(parse_text_split("lines").ok());
  EXPECT_EQ(*parse_text_split("file"), TextSplit::kWholeFile);
}

}  // namespace
}  // namespace nanoforge
