// How `nanoforge` reads a command line: --dashed-flags become absl's underscored names, a non-boolean flag
// without "=" takes the next argument as its value, and the other words are positional (the command's name,
// then e.g. train's section.key=value overrides). run_cli parses its own arguments with it, and launch reads
// the ranks' command after `--` with it, so that launch sees the recipe and overrides train will.
#pragma once

#include <string>
#include <vector>

namespace nanoforge {

// --window-pattern=X -> --window_pattern=X (only the name part; values keep their dashes).
std::string underscored_flag(const std::string& arg);
// Whether an (underscored) "--name" argument without "=" is a non-boolean flag, whose value follows.
bool takes_separate_value(const std::string& arg);
// The arguments that are neither a flag nor a flag's value, in order.
std::vector<std::string> positional_words(const std::vector<std::string>& args);
// The value of flag `name` (underscored) given as "--name VALUE" or "--name=VALUE"; empty if absent.
std::string flag_value(const std::vector<std::string>& args, const std::string& name);

}  // namespace nanoforge
