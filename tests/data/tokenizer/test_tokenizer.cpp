// The tokenizer's encoding on its own terms: the split pieces of hand-checked strings (including invalid
// UTF-8), exact round trips on random bytes, agreement with a direct port of tiktoken's byte-string merge
// (short and long pieces), special-token text as plain bytes, and thread-safe encoding.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "data/tokenizer/bpe_split.h"
#include "data/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace nanoforge {
namespace {

std::vector<std::string> pieces_of(std::string_view text) {
  auto splitter = PieceSplitter::create();
  EXPECT_TRUE(splitter.ok()) << splitter.status();
  std::vector<std::string> pieces;
  splitter->for_each_piece(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(TokenizerSplit, SplitsLikeNanochatsPattern) {
  EXPECT_EQ(pieces_of("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces_of("I'LL don't"), (Pieces{"I", "'LL", " don", "'t"}));
  EXPECT_EQ(pieces_of("12345 x"), (Pieces{"12", "34", "5", " x"}));  // \p{N}{1,2}
  EXPECT_EQ(pieces_of("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pieces_of("a\r\n\r\nb"), (Pieces{"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(pieces_of("x   \n  y"), (Pieces{"x", "   \n", " ", " y"}));
  EXPECT_EQ(pieces_of("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(pieces_of("f(x) == 42;\n"), (Pieces{"f", "(x", ")", " ==", " ", "42", ";\n"}));
  EXPECT_EQ(pieces_of("<|bos|>"), (Pieces{"<|", "bos", "|>"}));
  EXPECT_EQ(pieces_of("日本語 テスト"), (Pieces{"日本語", " テスト"}));
  EXPECT_EQ(pieces_of("👍🏽!"), (Pieces{"👍🏽!"}));
}

TEST(TokenizerSplit, InvalidUtf8RunsArePiecesOfTheirOwn) {
  EXPECT_EQ(pieces_of("ab\xff\xfe"
                      "cd"),
            (Pieces{"ab", "\xff\xfe", "cd"}));
  EXPECT_EQ(pieces_of("\x80"), (Pieces{"\x80"}));
  EXPECT_EQ(pieces_of("x \xc3"), (Pieces{"x", " ", "\xc3"}));  // a cut-off 2-byte sequence at the end
  // NUL is valid UTF-8, a control character: it may lead a letter run like any other non-letter.
  EXPECT_EQ(pieces_of(std::string("a\0b", 3)), (Pieces{"a", std::string("\0b", 2)}));
}

TEST(TokenizerSplit, LongWhitespaceRunsSplitWithoutFailing) {
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(pieces_of(spaces + "x"), (Pieces{std::string((1 << 20) - 1, ' '), " x"}));
  EXPECT_EQ(pieces_of(std::string(1 << 20, '\n')), (Pieces{std::string(1 << 20, '\n')}));
}

// tiktoken's _byte_pair_merge, on byte strings, exactly as in its Rust source.
std::vector<int32_t> reference_merge(const std::string& piece, const std::map<std::string, int32_t>& ranks) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  auto rank_of = [&](const std::string& bytes) {
    const auto it = ranks.find(bytes);
    return it == ranks.end() ? kMax : it->second;
  };
  if (piece.size() == 1) return {rank_of(piece)};
  std::vector<std::pair<size_t, int32_t>> parts;
  for (size_t i = 0; i + 1 < piece.size(); ++i)
    parts.emplace_back(i, rank_of(piece.substr(i, 2)));
  parts.emplace_back(piece.size() - 1, kMax);
  parts.emplace_back(piece.size(), kMax);
  auto get_rank = [&](size_t i) {
    return i + 3 < parts.size() ? rank_of(piece.substr(parts[i].first, parts[i + 3].first - parts[i].first))
                                : kMax;
  };
  while (true) {
    int32_t min_rank = kMax;
    size_t min_i = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].second < min_rank) {
        min_rank = parts[i].second;
        min_i = i;
      }
    }
    if (min_rank == kMax) break;
    if (min_i > 0) parts[min_i - 1].second = get_rank(min_i - 1);
    parts[min_i].second = get_rank(min_i);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(min_i) + 1);
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    ids.push_back(rank_of(piece.substr(parts[i].first, parts[i + 1].first - parts[i].first)));
  return ids;
}

TEST(TokenizerMerge, MatchesTiktokensByteStringMergeOnShortAndLongPieces) {
  auto tokenizer = Tokenizer::load(testing::golden_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::map<std::string, int32_t> ranks;
  for (int32_t id = 0; id < tokenizer->num_ranks(); ++id)
    ranks.emplace(std::string(tokenizer->token_bytes(id)), id);
  // Pieces of one kind (letters after an optional space; or spaces) so that they stay one piece, drawn from
  // few letters so that many merges apply; lengths cross the 128-byte switch to the heap merge.
  std::mt19937 rng(1234);
  const std::string letters = "aeinst";
  for (int trial = 0; trial < 400; ++trial) {
    const size_t length = 1 + rng() % (trial % 4 == 0 ? 700 : 60);
    std::string piece = trial % 2 ? " " : "";
    for (size_t i = 0; i < length; ++i)
      piece += letters[rng() % (trial % 3 == 0 ? 2 : letters.size())];
    // tiktoken maps a piece that is itself a token directly, and merges only the others.
    const auto whole = ranks.find(piece);
    const std::vector<int32_t> expected =
        whole != ranks.end() ? std::vector<int32_t>{whole->second} : reference_merge(piece, ranks);
    EXPECT_EQ(tokenizer->encode(piece), expected) << "piece '" << piece << "'";
  }
  const std::string spaces(300, ' ');
  EXPECT_EQ(tokenizer->encode(spaces), reference_merge(spaces, ranks));
}

std::string random_bytes(std::mt19937& rng, size_t length) {
  std::string bytes(length, '\0');
  for (char& c : bytes)
    c = static_cast<char>(rng() & 0xff);
  return bytes;
}

// Random text mixing ASCII, whitespace, multi-byte characters and occasional stray bytes.
std::string random_mixed_text(std::mt19937& rng, size_t items) {
  static const std::vector<std::string> atoms = {"a",       "e",
                                                 "the",     " ",
                                                 "  ",      "\n",
                                                 "\r\n",    "\t",
                                                 "'s",      "'LL",
                                                 "1",       "23",
                                                 ".",       ",",
                                                 "!",       "é",
                                                 "ß",       "日本",
                                                 "😀",       "👍🏽",
                                                 "\u00a0",  "\u3000",
                                                 "\xff",    "\xc3",
                                                 "\x80",    std::string("\0", 1),
                                                 "<|bos|>", "x"};
  std::string text;
  for (size_t i = 0; i < items; ++i)
    text += atoms[rng() % atoms.size()];
  return text;
}

TEST(TokenizerRoundTrip, DecodeOfEncodeIsExactOnArbitraryBytes) {
  auto tokenizer = Tokenizer::load(testing::golden_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::mt19937 rng(42);
  EXPECT_TRUE(tokenizer->encode("").empty());
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text =
        trial % 2 ? random_bytes(rng, rng() % 2000) : random_mixed_text(rng, rng() % 500);
    const std::vector<int32_t> ids = tokenizer->encode(text);
    for (const int32_t id : ids) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, tokenizer->num_ranks()) << "ordinary encoding never yields a special token";
    }
    ASSERT_EQ(tokenizer->decode(ids), text) << "trial " << trial;
  }
}

TEST(TokenizerRoundTrip, SpecialTokenTextIsEncodedAsPlainBytes) {
  auto tokenizer = Tokenizer::load(testing::golden_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  for (const std::string& name : Tokenizer::special_token_names()) {
    const std::vector<int32_t> ids = tokenizer->encode(name);
    EXPECT_GT(ids.size(), 1u) << name;
    for (const int32_t id : ids)
      EXPECT_LT(id, tokenizer->num_ranks()) << name;
    EXPECT_EQ(tokenizer->decode(ids), name);
  }
  const int32_t bos = tokenizer->bos_id();
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{bos}), "<|bos|>");
}

TEST(TokenizerEncode, ByteLevelTokenizerGivesTheBytes) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b)
    bytes.emplace_back(1, static_cast<char>(b));
  auto tokenizer = Tokenizer::from_ranks(bytes);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->encode("Hi \xff"), (std::vector<int32_t>{'H', 'i', ' ', 0xff}));
  EXPECT_EQ(tokenizer->vocab_size(), 256 + 9);
  EXPECT_EQ(tokenizer->bos_id(), 256);
  const std::vector<int32_t> lengths = tokenizer->token_byte_lengths();
  EXPECT_EQ(lengths[0], 1);
  EXPECT_EQ(lengths[256], 0);  // specials count no bytes (nanochat's token_bytes)
}

TEST(TokenizerEncode, IsThreadSafe) {
  auto tokenizer = Tokenizer::load(testing::golden_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::mt19937 rng(7);
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i)
    texts.push_back(random_mixed_text(rng, 2000));
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : texts)
    expected.push_back(tokenizer->encode(text));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (tokenizer->encode(texts[(i + t) % texts.size()]) != expected[(i + t) % texts.size()])
            ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

TEST(TokenizerEncode, PieceCachesAreKeptApartPerTokenizer) {
  // Encoding caches merged pieces per thread; two tokenizers used in turn on one thread must not see each
  // other's entries, and a warm cache must give what a cold one gave.
  auto golden = Tokenizer::load(testing::golden_dir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b)
    bytes.emplace_back(1, static_cast<char>(b));
  auto byte_level = Tokenizer::from_ranks(bytes);
  ASSERT_TRUE(byte_level.ok());
  const std::string text = "unmergeable words: zyxwvut qqqqjjjj Xylophones, xylophones; XYLOPHONES!";
  const std::vector<int32_t> cold = golden->encode(text);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(golden->encode(text), cold);
    const std::vector<int32_t> ids = byte_level->encode(text);
    EXPECT_EQ(ids, std::vector<int32_t>(text.begin(), text.end()));
  }
}

TEST(TokenizerEncode, HashIsStableAndFollowsTheRanks) {
  auto golden = Tokenizer::load(testing::golden_dir());
  auto again = Tokenizer::load(testing::golden_dir());
  ASSERT_TRUE(golden.ok() && again.ok());
  EXPECT_EQ(golden->hash(), again->hash());
  EXPECT_EQ(golden->hash().size(), 16u);
  std::vector<std::string> ranks;
  for (int32_t id = 0; id < golden->num_ranks() - 1; ++id)
    ranks.emplace_back(golden->token_bytes(id));
  auto fewer = Tokenizer::from_ranks(ranks);
  ASSERT_TRUE(fewer.ok());
  EXPECT_NE(fewer->hash(), golden->hash());
}

}  // namespace
}  // namespace nanoforge
