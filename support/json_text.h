// Writing JSON by hand where a record is a few fields (metrics lines, command summaries): a string as a JSON
// string literal, with the escapes RFC 8259 requires.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace nanoforge {

inline std::string json_string(std::string_view text) {
  std::string quoted = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\t':
        quoted += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          quoted += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          quoted += c;
        }
    }
  }
  return quoted + "\"";
}

}  // namespace nanoforge
