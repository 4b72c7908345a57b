// Running the nanoforge program (or any command) from a test through the shell: its exit status and what
// it wrote to stdout (redirect stderr in the command to capture it too), and the last line of that output
// (the commands end with a JSON record).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace nanoforge::test {

struct ProgramRun {
  int exit_code;       // -1 when the command did not exit normally
  std::string output;  // what the command wrote to stdout
};

inline ProgramRun run_command(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe))
    output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// The last line of `text` that is not empty ("" when there is none).
inline std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t start = text.rfind('\n', end);
  const size_t begin = start == std::string::npos ? 0 : start + 1;
  return text.substr(begin, end - begin + 1);
}

}  // namespace nanoforge::test
