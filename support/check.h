// Invariant checks for programming errors (a caller broke an op's contract: wrong shape, wrong dtype).
// These abort with the condition, the place and a message, because no caller can recover from them. Errors
// caused by input (files, flags, configs) are returned as absl::Status instead; see support/status.h.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace nanoforge::detail {

[[noreturn]] inline void check_failed(const char* condition, const char* file, int line,
                                      const std::string& message) {
  std::fprintf(stderr, "nanoforge: internal check failed: %s\n  at %s:%d\n  %s\n", condition, file, line,
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace nanoforge::detail

// NANOFORGE_CHECK(condition, "format {}", args...): aborts with a formatted message when condition is false.
#define NANOFORGE_CHECK(condition, ...)                                                              \
  do {                                                                                               \
    if (!(condition)) [[unlikely]] {                                                                 \
      ::nanoforge::detail::check_failed(#condition, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
    }                                                                                                \
  } while (false)
