// Base64 for rank files: a 64-entry alphabet one way, a 256-entry table the other (-1 = not base64).
#include "data/tokenizer/bpe_base64.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>

namespace nanoforge {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_decode_table() {
  std::array<int8_t, 256> table{};
  for (int8_t& entry : table)
    entry = -1;
  for (int i = 0; i < 64; ++i)
    table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 256> kDecodeTable = make_decode_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

absl::StatusOr<std::string> base64_decode(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty base64 token");
  if (text.size() % 4 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("base64 '{}' has {} characters, not a multiple of 4", text, text.size()));
  }
  size_t padding = 0;
  if (text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (last && k >= 4 - padding) {
        v <<= 6;
        continue;
      }
      const int8_t digit = kDecodeTable[static_cast<uint8_t>(c)];
      if (digit < 0) {
        return absl::InvalidArgumentError(
            fmt::format("'{}' is not base64: character {} ('{}') is not in the alphabet", text, i + k,
                        c == '=' ? std::string("= (padding in the middle)") : std::string(1, c)));
      }
      v = v << 6 | static_cast<uint32_t>(digit);
    }
    out += static_cast<char>(v >> 16);
    if (!last || padding < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (!last || padding < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

}  // namespace nanoforge
