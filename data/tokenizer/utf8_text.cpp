#include "data/tokenizer/utf8_text.h"

#include <cstdint>

namespace nanoforge {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Appends the decided text of `bytes` to `out` and returns how many bytes it consumed: all of them when
// `final`, else all but an unfinished character at the end (a well-formed prefix of one, cut by the end).
size_t decode(std::string_view bytes, bool final, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0x80) {
      out += bytes[i++];
      continue;
    }
    // Unicode's Table 3-7: the continuation bytes a lead takes, and the range of the first of them (which
    // excludes overlong forms, surrogates and code points above U+10FFFF).
    int continuations = 0;
    uint8_t low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      continuations = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      continuations = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      continuations = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {  // a continuation byte without a lead, C0, C1 or F5..FF: never in UTF-8
      out += kReplacement;
      ++i;
      continue;
    }
    size_t length = 1;  // the well-formed prefix of this character so far
    while (length <= static_cast<size_t>(continuations) && i + length < bytes.size()) {
      const auto next = static_cast<uint8_t>(bytes[i + length]);
      if (next < low || next > high) break;
      low = 0x80;
      high = 0xBF;
      ++length;
    }
    if (length == static_cast<size_t>(continuations) + 1) {
      out.append(bytes.substr(i, length));
    } else if (i + length == bytes.size() && !final) {
      return i;  // unfinished: the rest may arrive with the next bytes
    } else {
      out += kReplacement;  // the maximal ill-formed subpart, one replacement
    }
    i += length;
  }
  return i;
}

}  // namespace

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  decode(bytes, /*final=*/true, out);
  return out;
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  pending_.erase(0, decode(pending_, /*final=*/false, out));
  return out;
}

std::string Utf8Stream::finish() {
  std::string out;
  decode(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace nanoforge
