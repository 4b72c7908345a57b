// Progress of long jobs (tokenizer training, prep) on stderr: one status line, rewritten in place on a
// terminal and one line per update otherwise (logs), and durations as "42 s" / "3m05s".
#pragma once

#include <string>

namespace nanoforge {

std::string format_seconds(double seconds);  // "?" when unknown (negative or absurd)
void print_progress(const std::string& line, bool final);

}  // namespace nanoforge
