// replace_invalid_utf8 and Utf8Stream against Python's bytes.decode("utf-8", errors="replace") (what
// nanochat's tiktoken decode gives): the expected strings below were printed by CPython 3.11 for these
// inputs, which cover each row of Unicode's well-formed table, its example of maximal subparts, overlong
// forms, surrogates, code points above U+10FFFF and characters cut by the end. Streaming, split anywhere,
// gives the same text.
#include "data/tokenizer/utf8_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

namespace nanoforge {
namespace {

const std::string kBad = "\xEF\xBF\xBD";  // U+FFFD

std::string repeat(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i)
    out += text;
  return out;
}

const std::vector<std::pair<std::string, std::string>>& python_cases() {
  static const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain ascii", "plain ascii"},
      {"h\xC3\xA9llo w\xC3\xB6rld \xE2\x82\xAC\xF0\x9D\x84\x9E",
       "h\xC3\xA9llo w\xC3\xB6rld \xE2\x82\xAC\xF0\x9D\x84\x9E"},
      // Unicode 15, section 3.9, Table 3-8: a F1 80 80 E1 80 C2 b 80 c 80 BF d.
      {"a\xF1\x80\x80\xE1\x80\xC2"
       "b\x80"
       "c\x80\xBF"
       "d",
       std::string("a") + repeat(kBad, 3) + "b" + kBad + "c" + repeat(kBad, 2) + "d"},
      {"\xC0\xAF", repeat(kBad, 2)},          // overlong '/'
      {"\xE0\x80\xAF", repeat(kBad, 3)},      // overlong, three bytes
      {"\xED\xA0\x80", repeat(kBad, 3)},      // a surrogate
      {"\xF4\x90\x80\x80", repeat(kBad, 4)},  // above U+10FFFF
      {"\xF0\x9F\x98", kBad},                 // a four-byte character cut by the end
      {"\xE2\x82", kBad},
      {"\xC3", kBad},
      {"\xFF\xFE", repeat(kBad, 2)},
      {"a\xF0\x9F\x98\x80"
       "b",
       "a\xF0\x9F\x98\x80"
       "b"},
  };
  return cases;
}

TEST(Utf8Text, ReplacesAsPythonDoes) {
  for (const auto& [bytes, expected] : python_cases()) {
    EXPECT_EQ(replace_invalid_utf8(bytes), expected) << testing::PrintToString(bytes);
  }
}

TEST(Utf8Text, AStreamWaitsForTheRestOfACharacter) {
  Utf8Stream stream;
  EXPECT_EQ(stream.push("a\xF0\x9F"), "a");
  EXPECT_EQ(stream.push("\x98"), "");
  EXPECT_EQ(stream.push("\x80z"), "\xF0\x9F\x98\x80z");
  EXPECT_EQ(stream.push("\xE2\x82"), "");
  EXPECT_EQ(stream.finish(), kBad);  // the end came first
  EXPECT_EQ(stream.push("\xC3"), "");
  EXPECT_EQ(stream.push("x"), kBad + "x");  // a byte that cannot continue it decides at once
}

// Any split of any bytes streams to the whole's text, and that text is valid (replacing again changes
// nothing). The bytes are drawn mostly from the lead and continuation ranges, where the cases are.
TEST(Utf8Text, StreamingAnySplitGivesTheWholesText) {
  std::mt19937 random(7);
  const std::string alphabet = "a\x80\x8F\x90\x9F\xA0\xBF\xC0\xC2\xDF\xE0\xE1\xED\xEF\xF0\xF1\xF4\xF5\xFF";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes(random() % 12, ' ');
    for (char& c : bytes)
      c = alphabet[random() % alphabet.size()];
    const std::string whole = replace_invalid_utf8(bytes);
    Utf8Stream stream;
    std::string streamed;
    for (size_t start = 0; start < bytes.size();) {
      const size_t length = 1 + random() % 3;
      streamed += stream.push(std::string_view(bytes).substr(start, length));
      start += length;
    }
    streamed += stream.finish();
    ASSERT_EQ(streamed, whole) << testing::PrintToString(bytes);
    ASSERT_EQ(replace_invalid_utf8(whole), whole) << testing::PrintToString(bytes);
  }
}

}  // namespace
}  // namespace nanoforge
