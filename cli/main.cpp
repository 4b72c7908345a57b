// The `nanoforge` program: every command it has, in the order `nanoforge --help` lists them, each defined in
// its own file (cli/commands/, cli/bench/). `train` is cli/commands/train.cpp, which runs the loop in
// train/trainer.cpp. Before anything else main makes sure OpenBLAS runs the kernels this CPU supports
// (kernels/blas_core.h).
#include "cli/cli.h"
#include "cli/command.h"
#include "kernels/blas_core.h"

int main(int argc, char** argv) {
  using namespace nanoforge;
  restart_with_best_blas_kernels(argv);
  const std::vector<Command> commands = {tokenizer_train_command(),
                                         prep_command(),
                                         train_command(),
                                         launch_command(),
                                         sample_command(),
                                         eval_command(),
                                         report_command(),
                                         doctor_command(),
                                         parity_command(),
                                         bench_step_command(),
                                         bench_tokenizer_command(),
                                         bench_loader_command(),
                                         bench_checkpoint_command(),
                                         bench_allreduce_command(),
                                         bench_scaling_command(),
                                         bench_attention_command()};
  return run_cli(argc, argv, commands);
}
