// `nanoforge launch` on "machines" of this one, for tests/train/test_launch_training.cpp: each machine an
// agent in a process group of its own with one rank on an emulated GPU. A scenario starts three (and a head
// agent when asked), signals one of them mid-step and waits for the rest; the run a person makes by hand
// from the same checkpoints is what the result must equal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nanoforge::test {

constexpr double kHardLimitSeconds = 180;  // per run: a hang fails the test instead of stalling ctest
constexpr int64_t kSteps = 8;

// The fixture's one-layer model on the GPU, `kSteps` steps, a checkpoint every 2. The global batch is 6
// micro-batches of 4 x 64 tokens, so that 3 ranks (2 micro-steps each) and 2 ranks (3 each) both divide it.
std::string write_recipe(const std::string& dir);
std::vector<std::string> train_command(const std::string& recipe, const std::string& run);

// One machine: an agent in a process group of its own (its ranks are in it too), output to a file.
struct Machine {
  pid_t pid = -1;
  std::string output_path;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;

  void start(const std::vector<std::string>& arguments);
  bool poll();  // whether it exited (reaped without waiting)
  void kill_group(int sig);
  std::string output() const;
};

// "127.0.0.1:P" for --rdzv-endpoint, with P and P + 1 (rank 0's MASTER_PORT) free, below the ephemeral
// port range: a port after one that bind(0) handed out is what Linux gives outgoing connections next (the
// agents' own), so P + 1 of an ephemeral P could be taken before rank 0 listens on it.
std::string free_endpoint();

std::string describe(const std::vector<Machine>& machines);
std::string latest_checkpoint_name(const std::string& run);
std::vector<std::string> reformation_records(const std::string& run);  // metrics.jsonl's, in order
// The node rank the victim's agent held in the first round ("this machine node K"), or -1.
int victim_node_rank(const std::vector<Machine>& machines, int victim);

constexpr int kRankZeroMachine = -2;  // Scenario::victim: the machine whose agent holds node 0 (rank 0)

// One launch: 3 machines (each an agent with one rank), one of which gets a signal mid-step.
struct Scenario {
  std::vector<std::string> launch_flags;
  int victim = -1;  // the machine signalled, kRankZeroMachine, or -1: none
  int signal = SIGKILL;
  bool whole_group = true;  // the machine's whole process group, else its agent alone
  bool head = false;        // a head agent (--nproc-per-node 0) started first hosts the rendezvous
  bool returns = false;     // the victim's machine starts its agent again once the survivors re-formed
};

struct LaunchRun {
  std::vector<Machine> machines{};  // the 3, then the victim's when it came back
  std::optional<Machine> head{};
  int victim = -1;
  double death_to_first_step = -1;   // seconds from the signal to the first step after the re-formation
  double return_to_first_step = -1;  // from the victim's agent started again to the first step with it
};

// Runs `scenario`: the first machine started (or the head agent) hosts the rendezvous. The signal goes once
// step 3 is logged and step 2's checkpoint written (step 4 is then under way). Waits for every machine
// but a signalled whole group, then SIGKILLs whatever is left.
LaunchRun run_three_machines(const std::string& recipe, const std::string& run, const Scenario& scenario);

void print_agent_lines(const LaunchRun& launch);  // the agents' own lines, for the test's log
std::string describe(const LaunchRun& launch);

// A run's losses and final weights.
struct RunResult {
  std::map<int64_t, std::string> losses;
  std::map<std::string, std::vector<float>> weights;
};

// What a person does by hand: each segment on its world size up to its step (-1: the end), every segment
// after the first with `--resume`. Run once per list of segments in this process (the tests share them).
const RunResult& run_by_hand(const std::string& recipe, const std::vector<std::pair<int, int64_t>>& segments);

}  // namespace nanoforge::test
