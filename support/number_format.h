// Numbers for people: 896533746 -> "896,533,746".
#pragma once

#include <cstdint>
#include <string>

namespace nanoforge {

inline std::string with_thousands(int64_t value) {
  const std::string digits = std::to_string(value);
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

}  // namespace nanoforge
