// print_progress / format_seconds.
#include "cli/progress_line.h"

#include <fmt/format.h>
#include <unistd.h>

namespace nanoforge {

std::string format_seconds(double seconds) {
  if (seconds < 0 || seconds > 1e7) return "?";
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{}m{:02d}s", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
}

void print_progress(const std::string& line, bool final) {
  static const bool terminal = isatty(STDERR_FILENO) != 0;
  if (terminal) {
    fmt::print(stderr, "\r{:<100}{}", line, final ? "\n" : "");
  } else {
    fmt::print(stderr, "{}\n", line);
  }
}

}  // namespace nanoforge
