// BPE training: a hand-checked merge sequence, tie-breaking, early stop, nanochat's document cut and
// character limit, and determinism across thread counts and runs.
#include <gtest/gtest.h>

#include <map>

#include "data/tokenizer/bpe_piece_counts.h"
#include "data/tokenizer/bpe_trainer.h"
#include "data/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace nanoforge {
namespace {

PieceCounts counts_of(const std::vector<std::pair<std::string, int64_t>>& pieces) {
  PieceCounts counts;
  for (const auto& [piece, count] : pieces) {
    counts.pieces.push_back(piece);
    counts.counts.push_back(count);
  }
  return counts;
}

std::vector<std::string> learned(const BpeTrainResult& result) {
  return std::vector<std::string>(result.tokens_by_rank.begin() + 256, result.tokens_by_rank.end());
}

BpeTrainResult train(const PieceCounts& counts, int32_t merges, int threads = 1) {
  BpeTrainOptions options;
  options.num_merges = merges;
  options.threads = threads;
  return train_bpe(counts, options);
}

TEST(TokenizerTrain, HandCheckedMergesOfAaabdaaabac) {
  // Pairs of a a a b d a a a b a c: aa x4, ab x2, the rest x1 -> "aa". Then a a|a b: (aa,a) x2 and (a,b) x2
  // tie; the smaller pair (97,98) wins -> "ab". Then (aa,ab) x2 -> "aaab". Then all pairs count 1:
  // (97,99) "ac" is the smallest, then (100,258) "daaab".
  const BpeTrainResult result = train(counts_of({{"aaabdaaabac", 1}}), 5);
  EXPECT_EQ(learned(result), (std::vector<std::string>{"aa", "ab", "aaab", "ac", "daaab"}));
  EXPECT_EQ(result.merges, 5);
  EXPECT_EQ(result.tokens_by_rank[97], "a");  // bytes keep their own ids
}

TEST(TokenizerTrain, CountsWeighPiecesAndTiesGoToTheSmallerPair) {
  EXPECT_EQ(learned(train(counts_of({{"cd", 1}, {"ab", 1}}), 1)), (std::vector<std::string>{"ab"}));
  EXPECT_EQ(learned(train(counts_of({{"cd", 3}, {"ab", 2}}), 1)), (std::vector<std::string>{"cd"}));
  // "xy" once in a piece seen 5 times beats "ab" three times in a piece seen once.
  EXPECT_EQ(learned(train(counts_of({{"ababab", 1}, {"xy", 5}}), 2)), (std::vector<std::string>{"xy", "ab"}));
}

TEST(TokenizerTrain, StopsWhenNoPairIsLeft) {
  const BpeTrainResult result = train(counts_of({{"ab", 4}, {"c", 9}}), 10);
  EXPECT_EQ(result.merges, 1);
  EXPECT_EQ(learned(result), (std::vector<std::string>{"ab"}));
}

// The probe's `--doc-max-chars 0` on megabytes of one letter made tokens as long as the text, and building
// the tokenizer from them then stalled (quadratic in a token's length). Merges stop at the token length
// limit.
TEST(TokenizerTrain, NeverMakesATokenLongerThanTheLimit) {
  const BpeTrainResult result = train(counts_of({{std::string(100000, 'a'), 1}, {"ab", 2}}), 40);
  EXPECT_GT(result.skipped_long_pairs, 0);
  for (const std::string& token : result.tokens_by_rank)
    EXPECT_LE(static_cast<int64_t>(token.size()), Tokenizer::kMaxTokenBytes);
  EXPECT_TRUE(Tokenizer::from_ranks(result.tokens_by_rank).ok());
}

TEST(TokenizerTrain, FirstCharsCutsWholeUtf8Characters) {
  int64_t chars = 0;
  EXPECT_EQ(first_chars("héllo", 2, chars), "hé");
  EXPECT_EQ(chars, 2);
  EXPECT_EQ(first_chars("日本語", 5, chars), "日本語");
  EXPECT_EQ(chars, 3);
  EXPECT_EQ(first_chars("abc", 0, chars), "abc");  // 0: no cut
}

TEST(TokenizerTrain, CountPiecesFollowsNanochatsDocumentCutAndCharacterLimit) {
  const std::string dir = testing::fresh_temp_dir("train_limits");
  testing::write_file(
      dir + "/docs.jsonl",
      "{\"text\": \"one two two\"}\n{\"text\": \"three three three\"}\n{\"text\": \"four\"}\n");
  auto splitter = PieceSplitter::create();
  ASSERT_TRUE(splitter.ok());
  auto count = [&](int64_t max_chars, int64_t doc_max_chars) {
    auto reader = DocumentReader::open({dir + "/docs.jsonl"});
    EXPECT_TRUE(reader.ok());
    PieceCountOptions options;
    options.max_chars = max_chars;
    options.doc_max_chars = doc_max_chars;
    options.threads = 2;
    auto counts = count_pieces(*reader, *splitter, options);
    EXPECT_TRUE(counts.ok()) << counts.status();
    std::map<std::string, int64_t> map;
    for (size_t i = 0; i < counts->pieces.size(); ++i)
      map[counts->pieces[i]] = counts->counts[i];
    return std::make_pair(map, *counts);
  };
  const auto [all, all_counts] = count(0, 0);
  EXPECT_EQ(all, (std::map<std::string, int64_t>{
                     {"one", 1}, {" two", 2}, {"three", 1}, {" three", 2}, {"four", 1}}));
  EXPECT_EQ(all_counts.documents, 3);
  EXPECT_EQ(all_counts.chars, 11 + 17 + 4);
  EXPECT_EQ(all_counts.total_pieces, 7);
  // Each document cut to 7 characters: "one two", "three t", "four".
  const auto [cut, cut_counts] = count(0, 7);
  EXPECT_EQ(cut,
            (std::map<std::string, int64_t>{{"one", 1}, {" two", 1}, {"three", 1}, {" t", 1}, {"four", 1}}));
  // The limit is checked after each document: the one that passes 12 characters is still taken.
  const auto [limited, limited_counts] = count(12, 0);
  EXPECT_EQ(limited_counts.documents, 2);
  const auto [exact, exact_counts] = count(11, 0);
  EXPECT_EQ(exact_counts.documents, 2);  // 11 is not past 11: the second document is read, then the limit
}

TEST(TokenizerTrain, IsDeterministicAcrossThreadCountsAndRuns) {
  auto splitter = PieceSplitter::create();
  ASSERT_TRUE(splitter.ok());
  std::vector<std::vector<std::string>> runs;
  for (const int threads : {1, 3, 2}) {
    auto reader = DocumentReader::open({testing::golden_path("tokenizer_train.jsonl")});
    ASSERT_TRUE(reader.ok());
    PieceCountOptions count_options;
    count_options.threads = threads;
    auto counts = count_pieces(*reader, *splitter, count_options);
    ASSERT_TRUE(counts.ok()) << counts.status();
    runs.push_back(learned(train(*counts, 600, threads)));
  }
  EXPECT_EQ(runs[0].size(), 600u);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(TokenizerTrain, ResultLoadsAsATokenizerThatRoundTrips) {
  const BpeTrainResult result = train(counts_of({{"hello", 5}, {" world", 3}, {" hello", 2}}), 20);
  auto tokenizer = Tokenizer::from_ranks(result.tokens_by_rank);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<int32_t> ids = tokenizer->encode("hello world");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tokenizer->token_bytes(ids[0]), "hello");
  EXPECT_EQ(tokenizer->token_bytes(ids[1]), " world");
  EXPECT_EQ(tokenizer->encode("hello").size(), 1u);
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("hello world")), "hello world");
}

}  // namespace
}  // namespace nanoforge
