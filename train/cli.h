// Command-line handling for `nanoforge`: picking the subcommand, rewriting --dashed-flags to absl's
// underscored names, --help per command, and refusing flags that exist but do not apply to the command.
#pragma once

namespace nanoforge {

// Runs the program; returns the process exit status.
int run_cli(int argc, char** argv);

}  // namespace nanoforge
