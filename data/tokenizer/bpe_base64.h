// Standard base64 (RFC 4648 alphabet, '=' padding) for the token bytes in tiktoken rank files. Decoding is
// strict — wrong characters, wrong length or bad padding are errors — so a corrupt rank file is reported
// instead of silently loading different tokens.
#pragma once

#include <absl/status/statusor.h>

#include <string>
#include <string_view>

namespace nanoforge {

std::string base64_encode(std::string_view bytes);
// Errors say what is wrong with `text` (the caller adds the file and line).
absl::StatusOr<std::string> base64_decode(std::string_view text);

}  // namespace nanoforge
