// Tokenizer directories: save/load round trips, a bare tiktoken rank file, and every kind of bad file giving
// an error that names the file and line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "data/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace nanoforge {
namespace {

using testing::fresh_temp_dir;
using testing::golden_dir;
using testing::golden_path;
using testing::read_file;
using testing::write_file;

TEST(TokenizerFiles, SaveThenLoadGivesTheSameTokenizer) {
  auto golden = Tokenizer::load(golden_dir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  const std::string dir = fresh_temp_dir("files_roundtrip") + "/nested/dir";
  ASSERT_TRUE(golden->save(dir).ok());
  auto loaded = Tokenizer::load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->vocab_size(), golden->vocab_size());
  EXPECT_EQ(loaded->hash(), golden->hash());
  for (int32_t id = 0; id < golden->vocab_size(); ++id)
    ASSERT_EQ(loaded->token_bytes(id), golden->token_bytes(id)) << id;
  const std::string text = "Round trip: I'LL check 12345 ünïcödé 😀\r\n";
  EXPECT_EQ(loaded->encode(text), golden->encode(text));
  EXPECT_FALSE(std::filesystem::exists(dir + "/tokenizer.tiktoken.tmp"));
}

TEST(TokenizerFiles, LoadsABareTiktokenRankFileWithNanochatsSpecials) {
  auto tokenizer = Tokenizer::load_rank_file(golden_path("tokenizer.tiktoken"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->num_ranks(), 2039);
  EXPECT_EQ(tokenizer->bos_id(), 2039);
  EXPECT_EQ(tokenizer->vocab_size(), 2039 + 9);
}

TEST(TokenizerFiles, AcceptsRanksInAnyLineOrderAndCrlf) {
  // tiktoken's loader reads a dict: the line order does not matter, and splitlines() accepts \r\n.
  auto golden = Tokenizer::load(golden_dir());
  ASSERT_TRUE(golden.ok());
  const std::string golden_ranks = read_file(golden_path("tokenizer.tiktoken"));
  std::vector<std::string> lines;
  for (size_t start = 0; start < golden_ranks.size();) {
    const size_t end = golden_ranks.find('\n', start);
    lines.push_back(golden_ranks.substr(start, end - start));
    start = end + 1;
  }
  std::string reversed;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    reversed += *it + "\r\n\r\n";
  const std::string dir = fresh_temp_dir("files_reordered");
  write_file(dir + "/tokenizer.tiktoken", reversed);
  write_file(dir + "/special_tokens.txt", read_file(golden_path("special_tokens.txt")));
  auto loaded = Tokenizer::load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->hash(), golden->hash());
}

// Writes a tokenizer directory from the golden one with `edit` applied to one file's text, and returns the
// error message from loading it (empty if it loaded).
std::string load_error_after(const std::string& name, const std::string& file,
                             const std::function<std::string(std::string)>& edit) {
  const std::string dir = fresh_temp_dir("files_bad_" + name);
  for (const char* each : {Tokenizer::kRanksFile, Tokenizer::kSpecialsFile}) {
    std::string contents = read_file(golden_path(each));
    if (file == each) contents = edit(contents);
    write_file(dir + "/" + each, contents);
  }
  auto tokenizer = Tokenizer::load(dir);
  return tokenizer.ok() ? "" : std::string(tokenizer.status().message());
}

std::string replace_line(std::string text, int line_number, const std::string& replacement) {
  size_t start = 0;
  for (int line = 1; line < line_number; ++line)
    start = text.find('\n', start) + 1;
  const size_t end = text.find('\n', start);
  return text.replace(start, end - start, replacement);
}

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  EXPECT_FALSE(message.empty()) << "expected an error";
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "error '" << message << "' should mention '" << part << "'";
}

TEST(TokenizerFiles, MissingDirectoryOrFilesAreNamed) {
  auto missing_dir = Tokenizer::load("/nonexistent/tokenizer/dir");
  ASSERT_FALSE(missing_dir.ok());
  expect_mentions(std::string(missing_dir.status().message()),
                  {"/nonexistent/tokenizer/dir", "does not exist"});

  const std::string dir = fresh_temp_dir("files_missing");
  write_file(dir + "/special_tokens.txt", read_file(golden_path("special_tokens.txt")));
  auto no_ranks = Tokenizer::load(dir);
  ASSERT_FALSE(no_ranks.ok());
  expect_mentions(std::string(no_ranks.status().message()), {dir + "/tokenizer.tiktoken", "no such file"});

  std::filesystem::remove(dir + "/special_tokens.txt");
  write_file(dir + "/tokenizer.tiktoken", read_file(golden_path("tokenizer.tiktoken")));
  auto no_specials = Tokenizer::load(dir);
  ASSERT_FALSE(no_specials.ok());
  expect_mentions(std::string(no_specials.status().message()), {dir + "/special_tokens.txt", "no such file"});
}

TEST(TokenizerFiles, CorruptBase64NamesFileAndLine) {
  expect_mentions(load_error_after("base64_char", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 300, "aW!= 299"); }),
                  {"tokenizer.tiktoken:300:", "not base64", "'!'"});
  expect_mentions(load_error_after("base64_length", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 12, "QUJDR 11"); }),
                  {"tokenizer.tiktoken:12:", "not a multiple of 4"});
}

TEST(TokenizerFiles, DuplicateRankNamesBothLines) {
  expect_mentions(load_error_after("dup_rank", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 301, "IG4= 299"); }),
                  {"tokenizer.tiktoken:301:", "rank 299 is given twice", "line 300"});
}

TEST(TokenizerFiles, DuplicateTokenBytesNameBothLines) {
  // Line 301 is rank 300; give it the bytes of rank 299 (line 300, "aWQ=" = "id").
  expect_mentions(load_error_after("dup_bytes", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 301, "aWQ= 300"); }),
                  {"tokenizer.tiktoken:301:", "same bytes as rank 299 on line 300"});
}

TEST(TokenizerFiles, MissingRankOrByteOrMalformedLineIsAnError) {
  expect_mentions(
      load_error_after("gap", "tokenizer.tiktoken", [](std::string t) { return replace_line(t, 301, ""); }),
      {"tokenizer.tiktoken", "rank 300 is missing"});
  expect_mentions(load_error_after("no_byte", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 66, "QUFBQUFBQUFB 65"); }),
                  {"tokenizer.tiktoken", "byte 0x41 has no rank"});
  expect_mentions(load_error_after("malformed", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 7, "QQ=="); }),
                  {"tokenizer.tiktoken:7:", "expected 'BASE64_TOKEN RANK'"});
  expect_mentions(load_error_after("bad_rank", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 7, "Bg== six"); }),
                  {"tokenizer.tiktoken:7:", "rank 'six'"});
  expect_mentions(load_error_after("huge_rank", "tokenizer.tiktoken",
                                   [](std::string t) { return replace_line(t, 7, "Bg== 999999"); }),
                  {"tokenizer.tiktoken:7:", "rank 999999"});
  expect_mentions(load_error_after("empty", "tokenizer.tiktoken", [](std::string) { return std::string(); }),
                  {"tokenizer.tiktoken", "no ranks"});
}

TEST(TokenizerFiles, BadSpecialTokensFileNamesFileAndLine) {
  expect_mentions(load_error_after("special_id", "special_tokens.txt",
                                   [](std::string t) { return replace_line(t, 3, "<|user_end|> 5000"); }),
                  {"special_tokens.txt:3:", "<|user_end|> has id 5000, expected 2041"});
  expect_mentions(load_error_after("special_malformed", "special_tokens.txt",
                                   [](std::string t) { return replace_line(t, 2, "<|user_start|>"); }),
                  {"special_tokens.txt:2:", "expected 'NAME ID'"});
  expect_mentions(load_error_after("no_bos", "special_tokens.txt",
                                   [](std::string) { return std::string("<|user_start|> 2039\n"); }),
                  {"special_tokens.txt", "<|bos|>"});
}

// The probe's rank file with a 1 MiB token loaded in quadratic time; a file of any size was read whole.
TEST(TokenizerFiles, OversizedTokensAndFilesAreRefusedBeforeTheyAreLoaded) {
  const std::string dir = fresh_temp_dir("files_oversized");
  write_file(dir + "/special_tokens.txt", read_file(golden_path("special_tokens.txt")));
  std::string ranks = read_file(golden_path("tokenizer.tiktoken"));
  const int64_t lines = std::count(ranks.begin(), ranks.end(), '\n');
  ranks += std::string(4 * (1 << 20) / 3, 'Q') + " " + std::to_string(lines) + "\n";  // 1 MiB of bytes
  write_file(dir + "/tokenizer.tiktoken", ranks);
  auto long_token = Tokenizer::load(dir);
  ASSERT_FALSE(long_token.ok());
  expect_mentions(std::string(long_token.status().message()),
                  {"tokenizer.tiktoken:" + std::to_string(lines + 1) + ":", "tokens hold at most 1024"});

  std::filesystem::resize_file(dir + "/tokenizer.tiktoken", Tokenizer::kMaxRankFileBytes + 1);  // sparse
  auto huge_file = Tokenizer::load(dir);
  ASSERT_FALSE(huge_file.ok());
  expect_mentions(std::string(huge_file.status().message()),
                  {"tokenizer.tiktoken", "more than the 67108864"});
}

}  // namespace
}  // namespace nanoforge
