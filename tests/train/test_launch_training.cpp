// `nanoforge launch` (launch/agent.h) on 3 "machines" of this one: each agent in a process group of its own
// with its rank on an emulated GPU (torchrun-style NCCL: the CPU engine needs mpirun). One machine's whole
// process group is SIGKILLed in the middle of a step; the other two agents re-form and finish the run on 2
// ranks without any command, and the result is the run a person would have made by hand: 3 ranks to the same
// checkpoint, then `--resume` on 2 — also when the machine freezes instead, holds rank 0 and the rendezvous
// host, or when two fail in a row; the agents' two ways to give up, and a signal that stops the job.
// Emulation builds only; ~4 min on 2 loaded cores.
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

// Starts 3 agents with `launch_flags` (the first hosts the rendezvous), sends `signal` to machine `victim`'s
// process group (or to its agent alone) once step 3 is logged and step 2's checkpoint written (step 4 is then
// under way), waits for the others (victim -1: no signal, all three), then SIGKILLs whatever is left.
std::vector<Machine> run_three_machines_losing_one(const std::string& recipe, const std::string& run,
                                                   const std::vector<std::string>& launch_flags, int victim,
                                                   int signal, bool whole_group = true) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::string> arguments = {gpu_nanoforge_binary(), "launch", "--nproc-per-node=1",
                                        "--rdzv-endpoint=" + endpoint};
  arguments.insert(arguments.end(), launch_flags.begin(), launch_flags.end());
  arguments.push_back("--");
  for (const std::string& argument : train_command(recipe, run))
    arguments.push_back(argument);
  std::vector<Machine> machines(3);
  for (size_t i = 0; i < machines.size(); ++i) {
    machines[i].start(arguments);
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // machine 0 hosts
  }
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  bool signalled = false;
  while (seconds() < kHardLimitSeconds) {
    if (!signalled && victim >= 0 && std::filesystem::exists(run + "/metrics.jsonl") &&
        losses_by_step(run).count(3) == 1 && !latest_checkpoint_name(run).empty()) {
      Machine& target = machines[static_cast<size_t>(victim)];
      if (whole_group) {
        target.kill_group(signal);
      } else {
        ::kill(target.pid, signal);
      }
      signalled = true;
      std::printf("sent signal %d to machine %d's %s at %.2f s\n", signal, victim,
                  whole_group ? "process group" : "agent alone", seconds());
    }
    bool survivors_done = true;
    for (size_t i = 0; i < machines.size(); ++i) {
      if (static_cast<int>(i) != victim || !whole_group)
        survivors_done = machines[i].poll() && survivors_done;
    }
    if (survivors_done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (Machine& machine : machines) {
    if (!machine.poll()) {
      machine.kill_group(SIGKILL);
      int status = 0;
      ::waitpid(machine.pid, &status, 0);
      machine.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
  }
  return machines;
}

// The agents' own lines, for the test's log.
void print_agent_lines(const std::vector<Machine>& machines) {
  for (size_t i = 0; i < machines.size(); ++i) {
    for (const std::string& line : std::vector<std::string>(absl::StrSplit(machines[i].output(), '\n'))) {
      if (line.rfind("nanoforge launch", 0) == 0) std::printf("machine %zu: %s\n", i, line.c_str());
    }
  }
}

// What a person does by hand: each segment on its world size up to its step (-1: the end), every segment
// after the first with `--resume`.
void run_by_hand(const std::string& recipe, const std::string& run,
                 const std::vector<std::pair<int, int64_t>>& segments) {
  for (size_t segment = 0; segment < segments.size(); ++segment) {
    const auto [world, stop_at] = segments[segment];
    std::vector<std::string> command = {gpu_nanoforge_binary()};
    for (const std::string& argument : train_command(recipe, run))
      command.push_back(argument);
    if (stop_at > 0) {
      command.push_back("--stop-at-step");
      command.push_back(std::to_string(stop_at));
    }
    if (segment > 0) command.push_back("--resume");
    const int port = free_port();
    std::vector<std::vector<std::string>> environments;
    for (int rank = 0; rank < world; ++rank) {
      environments.push_back(torchrun_environment(rank, world, port));
      environments.back().push_back("NANOFORGE_EMULATOR=devices=" + std::to_string(world));
    }
    const std::vector<RankRun> ranks = run_processes(environments, command, -1, kHardLimitSeconds);
    for (const RankRun& rank : ranks)
      ASSERT_EQ(rank.exit_code, 0) << test::describe(ranks);
  }
}

// The node rank the victim's agent held in the first round ("this machine node K").
int victim_node_rank(const std::vector<Machine>& machines, int victim) {
  std::smatch node;
  const std::string output = machines[static_cast<size_t>(victim)].output();
  if (!std::regex_search(output, node, std::regex("round 1: 3 node\\(s\\), this machine node (\\d)")))
    return -1;
  return std::stoi(node[1]);
}

// The survivors (every machine but `victim`) finished all kSteps steps with exit 0 after one re-formation on
// 2 machines, and the run equals, bit for bit, the run a person makes by hand from the checkpoint it resumed
// from: both are 2 ranks resuming the same 3-rank checkpoint, and the emulated NCCL reduces in a fixed order,
// so a tolerance would only hide a wrong world size, accumulation count or data position.
void expect_finished_as_by_hand(const std::string& dir, const std::string& recipe, const std::string& run,
                                const std::vector<Machine>& machines, int victim) {
  std::string survivors_output;
  for (size_t i = 0; i < machines.size(); ++i) {
    if (static_cast<int>(i) == victim) continue;
    ASSERT_TRUE(machines[i].exited) << "machine " << i << " hung\n" << describe(machines);
    ASSERT_EQ(machines[i].exit_code, 0) << describe(machines);
    survivors_output += machines[i].output();
  }
  print_agent_lines(machines);
  std::smatch resumed;
  ASSERT_TRUE(
      std::regex_search(survivors_output, resumed,
                        std::regex("re-formed \\(round \\d+, restart 1 of at most 2\\) after [^\\n]*: 2 "
                                   "node\\(s\\) [^\\n]* resuming from step_0*(\\d+)")))
      << describe(machines);
  const int64_t resumed_step = std::stoll(resumed[1]);
  std::printf("re-formed on 2 machines, resumed from step %lld\n", static_cast<long long>(resumed_step));
  EXPECT_NE(survivors_output.find(fmt::format("done: step {} of {}", kSteps, kSteps)), std::string::npos)
      << describe(machines);
  const std::map<int64_t, std::string> losses = losses_by_step(run);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps)) << describe(machines);
  // The re-formation, in metrics.jsonl at the step resumed from and on rank 0's console.
  std::vector<std::string> records;
  for (const std::string& line : read_lines(run + "/metrics.jsonl")) {
    if (line.find("\"event\": \"reformation\"") != std::string::npos) records.push_back(line);
  }
  ASSERT_EQ(records.size(), 1u) << read_bytes(run + "/metrics.jsonl");
  std::printf("%s\n", records[0].c_str());
  for (const std::string& field :
       {fmt::format("\"step\": {}", resumed_step), std::string("\"restart\": 1"),
        std::string("\"previous_world_size\": 3"), std::string("\"world_size\": 2")})
    EXPECT_NE(records[0].find(field), std::string::npos) << records[0];
  EXPECT_NE(survivors_output.find(fmt::format("re-formed by nanoforge launch (restart 1): world size 3 -> 2, "
                                              "nodes left: {}",
                                              victim_node_rank(machines, victim))),
            std::string::npos)
      << describe(machines);

  const std::string by_hand = dir + "/by_hand";
  run_by_hand(recipe, by_hand, {{3, resumed_step}, {2, -1}});
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(losses_by_step(by_hand), losses);
  EXPECT_TRUE(final_weights(by_hand) == final_weights(run))
      << "the final weights differ from the run by hand";
}

const std::vector<std::string> kElasticFlags = {"--nnodes=2:3", "--max-restarts=2", "--join-timeout=60"};

TEST(LaunchAgents, MachineKilledMidStepTheSurvivorsFinishTheRunAsAResumeByHandWould) {
  const std::string dir = temp_dir("launch_machine_killed");
  const std::string recipe = write_recipe(dir);
  const std::vector<Machine> machines =
      run_three_machines_losing_one(recipe, dir + "/run", kElasticFlags, 2, SIGKILL);
  ASSERT_EQ(machines[2].signal, SIGKILL) << describe(machines);
  expect_finished_as_by_hand(dir, recipe, dir + "/run", machines, 2);
}

// A frozen machine (SIGSTOP: a hang, a kernel stuck): its connection stays open, the survivors' ranks fail
// their collectives at the timeout (exit 75), and their agents re-form without it.
TEST(LaunchAgents, MachineFrozenMidStepTheSurvivorsFinishTheRunAsAResumeByHandWould) {
  const std::string dir = temp_dir("launch_machine_frozen");
  const std::string recipe = write_recipe(dir);
  const std::vector<Machine> machines =
      run_three_machines_losing_one(recipe, dir + "/run", kElasticFlags, 2, SIGSTOP);
  expect_finished_as_by_hand(dir, recipe, dir + "/run", machines, 2);
}

// The machine of rank 0, whose agent also hosts the rendezvous: the others see the host's connection close,
// one of them hosts from then on (it binds the endpoint's port), and rank 0 moves to another machine.
TEST(LaunchAgents, RendezvousHostAndRankZeroKilledTheOthersTakeOverAndFinish) {
  const std::string dir = temp_dir("launch_host_killed");
  const std::string recipe = write_recipe(dir);
  const std::vector<Machine> machines =
      run_three_machines_losing_one(recipe, dir + "/run", kElasticFlags, 0, SIGKILL);
  ASSERT_EQ(machines[0].signal, SIGKILL) << describe(machines);
  expect_finished_as_by_hand(dir, recipe, dir + "/run", machines, 0);
  EXPECT_NE((machines[1].output() + machines[2].output()).find("after losing the rendezvous host"),
            std::string::npos)
      << describe(machines);
}

// MIN = 3: after the loss the survivors wait --join-timeout for a third machine, then both exit 1 with the
// host's reason, in one line.
TEST(LaunchAgents, FewerThanMinLeftTheAgentsExitNamingWhy) {
  const std::string dir = temp_dir("launch_below_min");
  const std::vector<Machine> machines = run_three_machines_losing_one(
      write_recipe(dir), dir + "/run", {"--nnodes=3:3", "--max-restarts=2", "--join-timeout=5"}, 2, SIGKILL);
  print_agent_lines(machines);
  for (int i : {0, 1}) {
    const Machine& machine = machines[static_cast<size_t>(i)];
    ASSERT_TRUE(machine.exited) << describe(machines);
    EXPECT_EQ(machine.exit_code, 1) << describe(machines);
    EXPECT_NE(machine.output().find("nanoforge launch: error: after 1 restart(s): the rendezvous host at "
                                    "127.0.0.1:"),
              std::string::npos)
        << describe(machines);
    EXPECT_NE(machine.output().find("refused: only 2 of at least 3 agents joined within --join-timeout 5 s"),
              std::string::npos)
        << describe(machines);
  }
}

// --max-restarts 0: the first failure ends both survivors with status 1 and the reason (this is also what
// the agents did before they restarted anything: the test above fails this way without the restart).
TEST(LaunchAgents, MaxRestartsReachedTheAgentsExitNamingWhy) {
  const std::string dir = temp_dir("launch_max_restarts");
  const std::vector<Machine> machines = run_three_machines_losing_one(
      write_recipe(dir), dir + "/run", {"--nnodes=2:3", "--max-restarts=0", "--join-timeout=60"}, 2, SIGKILL);
  print_agent_lines(machines);
  for (int i : {0, 1}) {
    const Machine& machine = machines[static_cast<size_t>(i)];
    ASSERT_TRUE(machine.exited) << describe(machines);
    EXPECT_EQ(machine.exit_code, 1) << describe(machines);
    EXPECT_NE(machine.output().find("and --max-restarts 0 allows no more restarts"), std::string::npos)
        << describe(machines);
  }
}

// SIGTERM to one agent alone (not its ranks): it does not end at once, and it restarts nothing; after the
// grace it passes SIGTERM to its rank, every rank stops at the same next step with a checkpoint (the
// trainer's stop vote), and every agent exits 0. The same command then resumes the run to its end.
TEST(LaunchAgents, SignalToOneAgentStopsTheJobWithACheckpointAndTheSameCommandResumesIt) {
  const std::string dir = temp_dir("launch_agent_signalled");
  const std::string recipe = write_recipe(dir);
  const std::string run = dir + "/run";
  std::vector<std::string> flags = kElasticFlags;
  flags.push_back("--stop-grace=1");
  const std::vector<Machine> machines =
      run_three_machines_losing_one(recipe, run, flags, 1, SIGTERM, /*whole_group=*/false);
  print_agent_lines(machines);
  for (const Machine& machine : machines) {
    ASSERT_TRUE(machine.exited) << describe(machines);
    EXPECT_EQ(machine.exit_code, 0) << describe(machines);
  }
  const std::map<int64_t, std::string> stopped = losses_by_step(run);
  ASSERT_LT(stopped.size(), static_cast<size_t>(kSteps)) << describe(machines);
  EXPECT_EQ(latest_checkpoint_name(run), fmt::format("step_{:06d}", stopped.rbegin()->first))
      << describe(machines);
  std::string outputs;
  for (const Machine& machine : machines)
    outputs += machine.output();
  EXPECT_EQ(outputs.find("re-formed"), std::string::npos) << describe(machines);

  const std::vector<Machine> relaunched =
      run_three_machines_losing_one(recipe, run, kElasticFlags, -1, 0);  // no victim
  for (const Machine& machine : relaunched) {
    ASSERT_TRUE(machine.exited) << describe(relaunched);
    EXPECT_EQ(machine.exit_code, 0) << describe(relaunched);
  }
  EXPECT_EQ(losses_by_step(run).size(), static_cast<size_t>(kSteps)) << describe(relaunched);
}

// Two failures in a row, --nnodes 1:3: machine 2 killed at step 4 of the first round, machine 1 in the
// second round once it has trained 3 steps; machine 0 finishes alone (the batch divides on 1 rank too), and
// the run equals the one made by hand: 3 ranks, then 2, then 1, each from the checkpoint the agents resumed.
TEST(LaunchAgents, TwoFailuresInARowTheLastMachineFinishesAsByHand) {
  const std::string dir = temp_dir("launch_two_failures");
  const std::string recipe = write_recipe(dir);
  const std::string run = dir + "/run";
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::string> arguments = {gpu_nanoforge_binary(),
                                        "launch",
                                        "--nproc-per-node=1",
                                        "--nnodes=1:3",
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
  auto reformations = [&] {
    std::vector<std::string> lines;
    if (!std::filesystem::exists(run + "/metrics.jsonl")) return lines;
    for (const std::string& line : read_lines(run + "/metrics.jsonl")) {
      if (line.find("\"event\": \"reformation\"") != std::string::npos) lines.push_back(line);
    }
    return lines;
  };
  const auto start = Clock::now();
  int killed = 0;
  while (std::chrono::duration<double>(Clock::now() - start).count() < kHardLimitSeconds &&
         !machines[0].poll()) {
    const bool has_run = std::filesystem::exists(run + "/metrics.jsonl");
    if (killed == 0 && has_run && losses_by_step(run).count(3) == 1 && !latest_checkpoint_name(run).empty()) {
      machines[2].kill_group(SIGKILL);
      killed = 1;
    }
    if (killed == 1 && has_run && reformations().size() == 1) {
      const int64_t resumed = static_cast<int64_t>(number_after(reformations()[0], "step"));
      if (losses_by_step(run).count(resumed + 3) == 1) {
        machines[1].kill_group(SIGKILL);
        killed = 2;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (Machine& machine : machines) {
    if (!machine.poll()) {
      machine.kill_group(SIGKILL);
      ::waitpid(machine.pid, nullptr, 0);
    }
  }
  print_agent_lines(machines);
  ASSERT_EQ(killed, 2) << describe(machines);
  ASSERT_TRUE(machines[0].exited) << describe(machines);
  ASSERT_EQ(machines[0].exit_code, 0) << describe(machines);
  EXPECT_NE(machines[0].output().find("re-formed (round 3, restart 2 of at most 2)"), std::string::npos)
      << describe(machines);
  const std::vector<std::string> records = reformations();
  ASSERT_EQ(records.size(), 2u) << read_bytes(run + "/metrics.jsonl");
  EXPECT_NE(records[1].find("\"previous_world_size\": 2, \"world_size\": 1"), std::string::npos)
      << records[1];
  const std::map<int64_t, std::string> losses = losses_by_step(run);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps)) << describe(machines);

  const std::string by_hand = dir + "/by_hand";
  run_by_hand(recipe, by_hand,
              {{3, static_cast<int64_t>(number_after(records[0], "step"))},
               {2, static_cast<int64_t>(number_after(records[1], "step"))},
               {1, -1}});
  if (HasFatalFailure()) return;
  EXPECT_EQ(losses_by_step(by_hand), losses);
  EXPECT_TRUE(final_weights(by_hand) == final_weights(run))
      << "the final weights differ from the run by hand";
}

}  // namespace
}  // namespace nanoforge
