// Parity with tiktoken and rustbpe on committed golden files (written by tools/dev/make_tokenizer_golden.py):
// encoding a varied text with the golden ranks gives exactly tiktoken's ids, the rank file we write is
// byte-identical to the one tiktoken wrote, and training on the golden documents gives exactly rustbpe's
// ranks.
#include <gtest/gtest.h>

#include <sstream>

#include "data/documents/documents.h"
#include "data/tokenizer/bpe_base64.h"
#include "data/tokenizer/bpe_piece_counts.h"
#include "data/tokenizer/bpe_trainer.h"
#include "data/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace nanoforge {
namespace {

using testing::golden_dir;
using testing::golden_path;

struct ParityCase {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<ParityCase> read_parity_cases() {
  std::vector<ParityCase> cases;
  std::istringstream lines(testing::read_file(golden_path("parity_cases.txt")));
  std::string line;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos);
    auto text = base64_decode(line.substr(0, tab));
    EXPECT_TRUE(text.ok()) << text.status();
    ParityCase parity_case{*text, {}};
    std::istringstream ids(line.substr(tab + 1));
    for (int32_t id; ids >> id;)
      parity_case.ids.push_back(id);
    cases.push_back(std::move(parity_case));
  }
  return cases;
}

TEST(TokenizerParity, EncodesTheGoldenTextExactlyAsTiktoken) {
  auto tokenizer = Tokenizer::load(golden_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<ParityCase> cases = read_parity_cases();
  ASSERT_GE(cases.size(), 20u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> ids = tokenizer->encode(cases[i].text);
    ASSERT_EQ(ids, cases[i].ids) << "parity case " << i << " (line " << i + 1 << " of parity_cases.txt): '"
                                 << cases[i].text.substr(0, 120) << "'";
    EXPECT_EQ(tokenizer->decode(ids), cases[i].text);
  }
}

TEST(TokenizerParity, GoldenHasNanochatsSpecialsAfterTheRanks) {
  auto tokenizer = Tokenizer::load(golden_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->num_ranks(), 2039);
  EXPECT_EQ(tokenizer->vocab_size(), 2048);
  EXPECT_EQ(tokenizer->bos_id(), 2039);
  EXPECT_EQ(tokenizer->special_id("<|output_end|>"), 2047);
  EXPECT_EQ(tokenizer->token_bytes(2039), "<|bos|>");
}

TEST(TokenizerParity, SavedFilesAreByteIdenticalToTiktokensRankFile) {
  auto tokenizer = Tokenizer::load(golden_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string dir = testing::fresh_temp_dir("parity_save");
  ASSERT_TRUE(tokenizer->save(dir).ok());
  EXPECT_EQ(testing::read_file(dir + "/tokenizer.tiktoken"),
            testing::read_file(golden_path("tokenizer.tiktoken")));
  EXPECT_EQ(testing::read_file(dir + "/special_tokens.txt"),
            testing::read_file(golden_path("special_tokens.txt")));
}

TEST(TokenizerParity, TrainingOnTheGoldenDocumentsReproducesRustbpesRanks) {
  auto golden = Tokenizer::load(golden_dir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto reader = DocumentReader::open({golden_path("tokenizer_train.jsonl")});
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto splitter = PieceSplitter::create();
  ASSERT_TRUE(splitter.ok());
  PieceCountOptions count_options;
  count_options.doc_max_chars = 0;  // the script gives rustbpe the whole documents
  count_options.threads = 2;
  auto counts = count_pieces(*reader, *splitter, count_options);
  ASSERT_TRUE(counts.ok()) << counts.status();
  BpeTrainOptions train_options;
  train_options.num_merges = golden->num_ranks() - 256;
  const BpeTrainResult result = train_bpe(*counts, train_options);
  ASSERT_EQ(result.merges, train_options.num_merges);
  EXPECT_EQ(result.reused_merges, 0);
  ASSERT_EQ(result.tokens_by_rank.size(), static_cast<size_t>(golden->num_ranks()));
  for (int32_t rank = 0; rank < golden->num_ranks(); ++rank) {
    ASSERT_EQ(result.tokens_by_rank[rank], golden->token_bytes(rank)) << "rank " << rank;
  }
}

}  // namespace
}  // namespace nanoforge
