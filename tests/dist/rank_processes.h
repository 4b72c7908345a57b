// Ranks as processes, for the tests that start several programs at once and watch each one's end (the NCCL
// fault and launch tests, the training runs that lose a rank): each process gets a clean launch environment
// plus its own variables, its output goes to a file, and it is waited for with waitpid under a hard limit —
// so a test sees every survivor's own exit status and time, which mpirun hides.
#pragma once

#include <string>
#include <vector>

namespace nanoforge::test {

struct RankRun {
  bool exited = false;  // false: still running (or stopped) at the hard limit, then killed
  int exit_code = -1;
  int signal = 0;
  double seconds = 0;  // from the start of the first process to this one's exit
  std::string output;  // stdout and stderr together
};

// A loopback TCP port free a moment ago (for MASTER_PORT).
int free_port();

// What a torchrun-style launch sets in rank `rank`'s process (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR on
// the loopback, MASTER_PORT, the rendezvous secret), as NAME=VALUE.
std::vector<std::string> torchrun_environment(int rank, int world, int port);

// Starts one process per entry of `environments` (each a list of NAME=VALUE added to the launch environment
// cleared of launcher variables) running `arguments`, waits for all of them but `victim` (-1: all) or
// `hard_limit_seconds`, and kills what is left.
std::vector<RankRun> run_processes(const std::vector<std::vector<std::string>>& environments,
                                   const std::vector<std::string>& arguments, int victim,
                                   double hard_limit_seconds);

// In a forked child: replaces the process with the program arguments[0] run with `arguments`; exits 127
// where that fails.
[[noreturn]] void exec_arguments(const std::vector<std::string>& arguments);

// Whether one of nanoforge's own error lines (not the emulator's) names `rank` after the reporting rank.
bool names_rank(const std::string& output, int rank);

// Every process's end and output, for failure messages.
std::string describe(const std::vector<RankRun>& runs);

}  // namespace nanoforge::test
