// Fuzz target: a tiktoken rank file (Tokenizer::load_rank_file; DIR/tokenizer.tiktoken of a tokenizer
// directory). An accepted file gives a tokenizer that encodes and decodes text back to its bytes. Seeds:
// the committed golden tokenizer's file and the fixture tokenizer's.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/tokenizer_round_trip.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("tokenizer.tiktoken");
  fuzz::write_file(path, data, size);
  const absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load_rank_file(path);
  fuzz::require_named(tokenizer.status(), path);
  if (!tokenizer.ok()) return 0;
  fuzz::require_text_round_trip(*tokenizer,
                                "The theory of everything, in 12 words\n\xc3\xa9t\xc3\xa9 \xff\xfe!");
  fuzz::require(tokenizer->special_id("<|bos|>") == tokenizer->bos_id(), "BOS is the <|bos|> special");
  tokenizer->hash();
  return 0;
}
