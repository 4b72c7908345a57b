// run_cli: `nanoforge [--help|--version] COMMAND [SUBCOMMAND] [--flag=value ...]`.
#include "cli/cli.h"

#include <absl/flags/commandlineflag.h>
#include <absl/flags/parse.h>
#include <absl/flags/reflection.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cli/build_info.h"
#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/flag_limits.h"
#include "dist/comm_watchdog.h"
#include "support/output_path.h"

namespace nanoforge {
namespace {

// Between a name and its text in --help's columns: a name as wide as its column still stands apart.
constexpr const char* kColumnGap = "  ";

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

void print_program_help(const std::vector<Command>& commands) {
  fmt::print(
      "nanoforge {}: pretrain nanochat's GPT from scratch, data-parallel, on CPUs and NVIDIA GPUs.\n\n",
      version_line());
  fmt::print("usage: nanoforge COMMAND [flags]\n       nanoforge COMMAND --help\n\ncommands:\n");
  size_t name_width = std::string("--version").size();
  for (const Command& command : commands)
    name_width = std::max(name_width, command.name.size());
  for (const Command& command : commands)
    fmt::print("  {:<{}}{}{}\n", command.name, name_width, kColumnGap, command.summary);
  fmt::print("\nglobal flags:\n  {:<{}}{}this text\n  {:<{}}{}version, commit and backends\n", "--help",
             name_width, kColumnGap, "--version", name_width, kColumnGap);
}

void print_command_help(const Command& command) {
  fmt::print("usage: nanoforge {} {}\n\n{}\n", command.name, command.usage, command.summary);
  if (command.flags.empty()) return;
  fmt::print("\nflags:\n");
  size_t name_width = 0;
  for (const std::string& name : command.flags)
    name_width = std::max(name_width, name.size() + 2);
  for (const std::string& name : command.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    const auto own_help = command.flag_help.find(name);
    fmt::print("  {:<{}}{}{}\n", "--" + dashed(name), name_width, kColumnGap,
               own_help != command.flag_help.end()
                   ? own_help->second
                   : fmt::format("{} (default: {})", flag->Help(),
                                 flag->DefaultValue().empty() ? "none" : flag->DefaultValue()));
  }
}

// Why an argument is not a flag of `command`. `--train.num_iterations=5` is torchtitan's spelling of a recipe
// override; a command that reads a recipe and takes overrides says how to write it.
std::string not_a_flag_message(const Command& command, const std::string& arg) {
  std::string message = fmt::format("nanoforge {}: {} is not a flag of this command", command.name,
                                    arg.substr(0, arg.find('=')));
  const std::string name =
      arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
  const size_t dot = name.find('.');
  const bool override_shaped = dot != std::string::npos && dot > 0 && dot + 1 < name.size();
  const bool takes_overrides =
      command.takes_arguments &&
      std::find(command.flags.begin(), command.flags.end(), "recipe") != command.flags.end();
  if (override_shaped && takes_overrides) {
    message += fmt::format("; recipe overrides are written without dashes: {}",
                           arg.find('=') == std::string::npos ? name + "=VALUE" : arg.substr(2));
  }
  return message + fmt::format("; see `nanoforge {} --help`", command.name);
}

// Whether an (underscored) argument is a positional word or one of the command's flags; absl's boolean
// negation --noNAME counts as NAME.
bool flag_applies(const Command& command, const std::string& arg) {
  if (arg.rfind("--", 0) != 0) return true;
  const std::string name =
      arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
  auto accepted = [&](const std::string& candidate) {
    return std::find(command.flags.begin(), command.flags.end(), candidate) != command.flags.end();
  };
  return accepted(name) || (name.rfind("no", 0) == 0 && accepted(name.substr(2)));
}

// The command named by the leading positional words, e.g. "bench step".
const Command* find_command(const std::vector<Command>& commands, const std::vector<std::string>& words,
                            size_t& used) {
  for (const Command& command : commands) {
    std::string joined;
    for (size_t n = 0; n < words.size(); ++n) {
      joined += (n ? " " : "") + words[n];
      if (joined == command.name) {
        used = n + 1;
        return &command;
      }
    }
  }
  return nullptr;
}

}  // namespace

int run_cli(int argc, char** argv, const std::vector<Command>& commands) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // After `--`: a command line of its own (launch's ranks run it), neither scanned nor parsed here.
  std::vector<std::string> passed_through;
  if (auto dashes = std::find(args.begin(), args.end(), "--"); dashes != args.end()) {
    passed_through.assign(dashes + 1, args.end());
    args.erase(dashes, args.end());
  }
  const std::vector<std::string> words = positional_words(args);
  bool wants_help = false;
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") wants_help = true;
    if (arg == "--version") {
      fmt::print("{}\n", version_report());
      return 0;
    }
  }
  if (words.empty()) {
    print_program_help(commands);
    return wants_help ? 0 : 2;
  }
  size_t used = 0;
  const Command* command = find_command(commands, words, used);
  if (command == nullptr) {
    fmt::print(stderr, "nanoforge: unknown command '{}'; `nanoforge --help` lists the commands\n",
               fmt::join(words, " "));
    return 2;
  }
  if (wants_help) {
    print_command_help(*command);
    return 0;
  }
  std::vector<std::string> arguments(words.begin() + static_cast<std::ptrdiff_t>(used), words.end());
  if (!passed_through.empty() && !command->takes_command) {
    fmt::print(
        stderr,
        "nanoforge {}: unexpected '--' (only launch takes a command after it); see `nanoforge {} --help`\n",
        command->name, command->name);
    return 2;
  }
  if (!arguments.empty() && !command->takes_arguments) {
    fmt::print(stderr, "nanoforge {}: unexpected argument '{}'; see `nanoforge {} --help`\n", command->name,
               arguments.front(), command->name);
    return 2;
  }

  std::vector<std::string> rewritten = {argv[0]};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    rewritten.push_back(underscored_flag(arg));
    if (!flag_applies(*command, rewritten.back())) {
      fmt::print(stderr, "{}\n", not_a_flag_message(*command, arg));
      return 2;
    }
    if (takes_separate_value(rewritten.back()) && i + 1 < args.size()) rewritten.push_back(args[++i]);
  }
  std::vector<char*> pointers;
  for (std::string& arg : rewritten)
    pointers.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());

  absl::Status status = check_flag_limits(command->flags);
  // A benchmark's record goes to --json-out at its end: a path it could not use is refused before it runs.
  const absl::CommandLineFlag* json_out = absl::FindCommandLineFlag("json_out");
  if (status.ok() && json_out != nullptr && !json_out->CurrentValue().empty()) {
    status = check_output_file_path(json_out->CurrentValue());
  }
  if (command->takes_command) arguments = passed_through;
  if (status.ok()) status = command->run(arguments);
  if (!status.ok()) {
    fmt::print(stderr, "nanoforge {}: error: {}\n", command->name, std::string(status.message()));
    // A lost rank: the status a launcher restarts the job from its last checkpoint on.
    return communication_failed() ? kCommFailureExitCode : 1;
  }
  return 0;
}

}  // namespace nanoforge
