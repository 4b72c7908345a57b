// Decoded tokens as text: a token is bytes, and a model's samples (early in training, or at a high
// temperature) put together byte sequences that are not UTF-8 — half a character, a stray continuation byte.
// Printed raw they garble a terminal and make a strict UTF-8 reader (Python's, a JSON parser) fail. nanochat
// decodes with tiktoken, which replaces them: this gives exactly Python's bytes.decode("utf-8",
// errors="replace") — each maximal ill-formed subpart becomes one U+FFFD (Unicode's recommended practice),
// and valid text is unchanged.
#pragma once

#include <string>
#include <string_view>

namespace nanoforge {

// `bytes` as valid UTF-8, with U+FFFD in place of each ill-formed subpart.
std::string replace_invalid_utf8(std::string_view bytes);

// The same, for bytes that arrive token by token (`sample` prints each token as it is drawn): a character
// split between tokens waits for its remaining bytes instead of being replaced. The concatenation of every
// push and the finish is replace_invalid_utf8 of all the bytes.
class Utf8Stream {
 public:
  // Appends `bytes`; returns the text that is decided so far.
  std::string push(std::string_view bytes);
  // The end of the stream: what still waits (an unfinished character) becomes U+FFFD.
  std::string finish();

 private:
  std::string pending_;  // the start of a character whose remaining bytes have not arrived (at most 3 bytes)
};

}  // namespace nanoforge
