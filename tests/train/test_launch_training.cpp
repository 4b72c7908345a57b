// `nanoforge launch` (launch/agent.h) on 3 "machines" of this one: each agent in a process group of its own
// with its rank on an emulated GPU (torchrun-style NCCL: the CPU engine needs mpirun). One machine's whole
// process group is SIGKILLed in the middle of a step; the other two agents re-form and finish the run on 2
// ranks without any command, and the result is the run a person would have made by hand: 3 ranks to the same
// checkpoint, then `--resume` on 2. Emulation builds only; ~40 s on 2 loaded cores.
#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/dist/rank_processes.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;
using Clock = std::chrono::steady_clock;

constexpr double kTimeoutSeconds = 2;      // dist.timeout_seconds of these runs
constexpr double kHardLimitSeconds = 180;  // per run: a hang fails the test instead of stalling ctest
constexpr int64_t kSteps = 8;
constexpr const char* kSecret = "NANOFORGE_RENDEZVOUS_SECRET=launch-test-secret-0123456789";

// The fixture's one-layer model on the GPU, `kSteps` steps, a checkpoint every 2. The global batch is 6
// micro-batches of 4 x 64 tokens, so that 3 ranks (2 micro-steps each) and 2 ranks (3 each) both divide it.
std::string write_recipe(const std::string& dir) {
  Recipe recipe = small_recipe();
  recipe.train.device = "cuda";
  recipe.train.horizon.num_iterations = kSteps;
  recipe.train.horizon.total_batch_size = 6 * 4 * 64;
  recipe.train.schedule.warmup_steps = 1;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = 2;
  recipe.dist.timeout_seconds = kTimeoutSeconds;
  return recipe_file(recipe, dir);
}

std::vector<std::string> train_command(const std::string& recipe, const std::string& run) {
  return {"train", "--recipe", recipe, "--run-dir", run};
}

// One machine: an agent in a process group of its own (its ranks are in it too), output to a file.
struct Machine {
  pid_t pid = -1;
  std::string output_path;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;

  void start(const std::vector<std::string>& arguments) {
    output_path = (std::filesystem::temp_directory_path() / "nanoforge_agent_output_XXXXXX").string();
    const int fd = ::mkstemp(output_path.data());
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      for (const char* name :
           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
            "SLURM_NTASKS", "SLURM_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
        ::unsetenv(name);
      ::putenv(const_cast<char*>(kSecret));
      ::putenv(const_cast<char*>("NANOFORGE_EMULATOR=devices=1"));
      exec_arguments(arguments);
    }
    ::setpgid(pid, pid);  // also here: the kill below must not race the child's own call
    ::close(fd);
  }
  bool poll() {
    int status = 0;
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      if (WIFEXITED(status)) exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) signal = WTERMSIG(status);
    }
    return exited;
  }
  void kill_group(int sig) { ::kill(-pid, sig); }
  std::string output() const { return read_bytes(output_path); }
};

std::string describe(const std::vector<Machine>& machines) {
  std::string text;
  for (size_t i = 0; i < machines.size(); ++i) {
    text += "--- machine " + std::to_string(i) + ", exit " + std::to_string(machines[i].exit_code) +
            ", signal " + std::to_string(machines[i].signal) + ":\n" + machines[i].output();
  }
  return text;
}

std::string latest_checkpoint_name(const std::string& run) {
  std::string name = read_bytes(run + "/checkpoints/latest");
  while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
    name.pop_back();
  return name;
}

// Starts 3 agents (the first hosts the rendezvous), SIGKILLs machine `victim`'s process group once step 3
// is logged and step 2's checkpoint written (step 4 is then under way), and waits for the others.
std::vector<Machine> run_three_machines_losing_one(const std::string& recipe, const std::string& run,
                                                   int victim) {
  const int port = free_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> arguments = {gpu_nanoforge_binary(),
                                        "launch",
                                        "--nnodes=2:3",
                                        "--nproc-per-node=1",
                                        "--max-restarts=2",
                                        "--join-timeout=60",
                                        "--rdzv-endpoint=" + endpoint,
                                        "--"};
  for (const std::string& argument : train_command(recipe, run))
    arguments.push_back(argument);
  std::vector<Machine> machines(3);
  for (size_t i = 0; i < machines.size(); ++i) {
    machines[i].start(arguments);
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // machine 0 hosts
  }
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  bool killed = false;
  while (seconds() < kHardLimitSeconds) {
    if (!killed && std::filesystem::exists(run + "/metrics.jsonl") && losses_by_step(run).count(3) == 1 &&
        !latest_checkpoint_name(run).empty()) {
      machines[static_cast<size_t>(victim)].kill_group(SIGKILL);
      killed = true;
      std::printf("killed machine %d's process group at %.2f s\n", victim, seconds());
    }
    bool all = true;
    for (Machine& machine : machines)
      all = machine.poll() && all;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (Machine& machine : machines) {
    if (!machine.poll()) {
      machine.kill_group(SIGKILL);
      ::waitpid(machine.pid, nullptr, 0);
    }
  }
  return machines;
}

// What a person does by hand: 3 ranks up to the checkpoint of `step`, then `--resume` on 2 ranks.
void run_by_hand(const std::string& recipe, const std::string& run, int64_t step) {
  std::vector<std::string> command = {gpu_nanoforge_binary()};
  for (const std::string& argument : train_command(recipe, run))
    command.push_back(argument);
  std::vector<std::string> first = command;
  first.push_back("--stop-at-step");
  first.push_back(std::to_string(step));
  for (const auto& [world, arguments] : {std::pair{3, first}, std::pair{2, command}}) {
    std::vector<std::string> resumed = arguments;
    if (world == 2) resumed.push_back("--resume");
    const int port = free_port();
    std::vector<std::vector<std::string>> environments;
    for (int rank = 0; rank < world; ++rank) {
      environments.push_back(torchrun_environment(rank, world, port));
      environments.back().push_back("NANOFORGE_EMULATOR=devices=" + std::to_string(world));
    }
    const std::vector<RankRun> ranks = run_processes(environments, resumed, -1, kHardLimitSeconds);
    for (const RankRun& rank : ranks)
      ASSERT_EQ(rank.exit_code, 0) << test::describe(ranks);
  }
}

// The run finishes on 2 machines without any command, all kSteps steps, and equals, bit for bit, the run a
// person makes by hand from the checkpoint it resumed from: both are 2 ranks resuming the same 3-rank
// checkpoint, and the emulated NCCL reduces in a fixed order, so a tolerance would only hide a wrong world
// size, accumulation count or data position.
TEST(LaunchAgents, MachineKilledMidStepTheSurvivorsFinishTheRunAsAResumeByHandWould) {
  const std::string dir = temp_dir("launch_machine_killed");
  const std::string recipe = write_recipe(dir);
  const std::string run = dir + "/run";
  const std::vector<Machine> machines = run_three_machines_losing_one(recipe, run, 2);
  ASSERT_EQ(machines[2].signal, SIGKILL) << describe(machines);
  for (int i : {0, 1}) {
    ASSERT_TRUE(machines[static_cast<size_t>(i)].exited) << "machine " << i << " hung\n"
                                                         << describe(machines);
    ASSERT_EQ(machines[static_cast<size_t>(i)].exit_code, 0) << describe(machines);
  }
  const std::string host_output = machines[0].output();
  std::smatch resumed;
  ASSERT_TRUE(std::regex_search(host_output, resumed,
                                std::regex("re-formed \\(round 2, restart 1 of at most 2\\) after [^\\n]*: 2 "
                                           "node\\(s\\) [^\\n]* resuming from step_0*(\\d+)")))
      << describe(machines);
  const int64_t resumed_step = std::stoll(resumed[1]);
  for (const Machine& machine : machines) {  // the agents' own lines, for the log
    for (const std::string& line : std::vector<std::string>(absl::StrSplit(machine.output(), '\n'))) {
      if (line.rfind("nanoforge launch", 0) == 0) std::printf("%s\n", line.c_str());
    }
  }
  std::printf("re-formed on 2 machines, resumed from step %lld\n", static_cast<long long>(resumed_step));
  EXPECT_NE(host_output.find(fmt::format("done: step {} of {}", kSteps, kSteps)), std::string::npos)
      << describe(machines);
  const std::map<int64_t, std::string> losses = losses_by_step(run);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps)) << describe(machines);

  const std::string by_hand = dir + "/by_hand";
  run_by_hand(recipe, by_hand, resumed_step);
  if (HasFatalFailure()) return;
  EXPECT_EQ(losses_by_step(by_hand), losses);
  EXPECT_TRUE(final_weights(by_hand) == final_weights(run))
      << "the final weights differ from the run by hand";
}

}  // namespace
}  // namespace nanoforge
