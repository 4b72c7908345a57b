// A command line's flags, their values and its positional words (cli/command_line.h).
#include "cli/command_line.h"

#include <absl/flags/commandlineflag.h>
#include <absl/flags/reflection.h>

#include <algorithm>

namespace nanoforge {

std::string underscored_flag(const std::string& arg) {
  if (arg.rfind("--", 0) != 0 || arg == "--") return arg;
  const size_t equals = arg.find('=');
  std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
  std::replace(name.begin(), name.end(), '-', '_');
  return "--" + name + (equals == std::string::npos ? "" : arg.substr(equals));
}

bool takes_separate_value(const std::string& arg) {
  if (arg.rfind("--", 0) != 0 || arg.find('=') != std::string::npos) return false;
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(arg.substr(2));
  return flag != nullptr && !flag->IsOfType<bool>();
}

std::vector<std::string> positional_words(const std::vector<std::string>& args) {
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("-", 0) != 0) {
      words.push_back(args[i]);
    } else if (takes_separate_value(underscored_flag(args[i]))) {
      ++i;  // "--flag value": the next argument is the value
    }
  }
  return words;
}

std::string flag_value(const std::vector<std::string>& args, const std::string& name) {
  const std::string flag = "--" + name;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string arg = underscored_flag(args[i]);
    if (arg.rfind(flag + "=", 0) == 0) return arg.substr(flag.size() + 1);
    if (takes_separate_value(arg) && i + 1 < args.size()) {
      if (arg == flag) return args[i + 1];
      ++i;
    }
  }
  return "";
}

}  // namespace nanoforge
