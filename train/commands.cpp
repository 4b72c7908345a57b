// The command table of `nanoforge`: the one list every command is registered in.
#include "train/command.h"

namespace nanoforge {

const std::vector<Command>& all_commands() {
  static const std::vector<Command> commands = {tokenizer_train_command(),
                                                prep_command(),
                                                train_command(),
                                                sample_command(),
                                                eval_command(),
                                                doctor_command(),
                                                parity_command(),
                                                bench_step_command(),
                                                bench_tokenizer_command(),
                                                bench_loader_command(),
                                                bench_checkpoint_command(),
                                                bench_allreduce_command(),
                                                bench_scaling_command()};
  return commands;
}

}  // namespace nanoforge
