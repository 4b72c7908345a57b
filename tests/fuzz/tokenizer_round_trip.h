// The property the tokenizer and document targets check on whatever they accept: decoding the encoding of
// any bytes gives the bytes back (data/tokenizer/tokenizer.h), and every id is in the vocabulary.
#pragma once

#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

namespace nanoforge::fuzz {

inline void require_text_round_trip(const Tokenizer& tokenizer, std::string_view text) {
  const std::vector<int32_t> ids = tokenizer.encode(text);
  for (const int32_t id : ids)
    require(id >= 0 && id < tokenizer.num_ranks(), "an encoded id is an ordinary token");
  require(tokenizer.decode(ids) == text, "decode(encode(text)) == text");
}

}  // namespace nanoforge::fuzz
