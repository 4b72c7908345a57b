// The command table of `nanoforge`: the one list every command is registered in.
#include "train/command.h"

namespace nanoforge {

const std::vector<Command>& all_commands() {
  static const std::vector<Command> commands = {parity_command(), bench_step_command()};
  return commands;
}

}  // namespace nanoforge
