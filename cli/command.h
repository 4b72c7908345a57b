// A subcommand of the `nanoforge` program: its name ("parity", "bench step"), a one-line summary, the usage
// text, the flags it accepts (defined with ABSL_FLAG next to the code that reads them, or in common_flags
// when several commands share them), and the function that runs it with the positional arguments that follow
// the name (only commands that take them get any). Errors come back as absl::Status and are printed once, by
// main.
#pragma once

#include <absl/status/status.h>

#include <map>
#include <string>
#include <vector>

namespace nanoforge {

struct Command {
  std::string name;
  std::string summary;
  std::string usage;               // the lines after "usage: nanoforge NAME"
  std::vector<std::string> flags;  // absl flag names (underscores); shown with dashes
  absl::Status (*run)(const std::vector<std::string>& arguments) = nullptr;
  bool takes_arguments = false;  // e.g. train's section.key=value overrides
  // What shared flags mean to this command (name -> help, its default included), where their common help
  // would mislead: prep's --resume is not train's, and prep's --out has a default.
  std::map<std::string, std::string> flag_help = {};
  bool takes_command = false;  // everything after `--` is passed through unparsed (launch's ranks' command)
};

// The commands, each defined in its own file of cli/commands/ or cli/bench/.
Command parity_command();
Command bench_step_command();
Command tokenizer_train_command();
Command bench_tokenizer_command();
Command bench_loader_command();
Command bench_checkpoint_command();
Command bench_allreduce_command();
Command bench_scaling_command();
Command bench_attention_command();
Command prep_command();
Command train_command();
Command sample_command();
Command eval_command();
Command doctor_command();
Command report_command();
Command launch_command();

}  // namespace nanoforge
