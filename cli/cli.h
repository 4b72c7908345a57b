// Command-line handling for `nanoforge`: picking the subcommand, rewriting --dashed-flags to absl's
// underscored names, --help per command, and refusing flags that exist but do not apply to the command.
#pragma once

#include <vector>

#include "cli/command.h"

namespace nanoforge {

// Runs the program with `commands` (in the order --help lists them); returns the process exit status.
int run_cli(int argc, char** argv, const std::vector<Command>& commands);

}  // namespace nanoforge
