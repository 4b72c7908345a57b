// Fuzz target: a tokenizer directory's special_tokens.txt ("NAME ID" per line) beside a valid rank file,
// loaded with Tokenizer::load. An accepted file gives specials after the ranks, BOS among them, and a
// tokenizer that still encodes text back to its bytes.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/tokenizer_round_trip.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string made = fuzz::scratch_path("tokenizer/");
    if (!fuzz::fixture_tokenizer().save(made).ok()) std::abort();
    return made;
  }();
  fuzz::write_file(dir + "/" + Tokenizer::kSpecialsFile, data, size);
  const absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(dir);
  fuzz::require_named(tokenizer.status(), Tokenizer::kSpecialsFile);
  if (!tokenizer.ok()) return 0;
  fuzz::require(tokenizer->num_ranks() == fuzz::fixture_tokenizer().num_ranks(), "the ranks are the file's");
  fuzz::require(
      tokenizer->bos_id() >= tokenizer->num_ranks() && tokenizer->bos_id() < tokenizer->vocab_size(),
      "BOS is a special token");
  fuzz::require_text_round_trip(*tokenizer, "the <|bos|> thing");
  return 0;
}
