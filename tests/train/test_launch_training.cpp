// `nanoforge launch` (launch/agent.h) on 3 "machines" of this one: each agent in a process group of its own
// with its rank on an emulated GPU (torchrun-style NCCL: the CPU engine needs mpirun). One machine's whole
// process group is SIGKILLed in the middle of a step; the other two agents re-form and finish the run on 2
// ranks without any command, and the result is the run a person would have made by hand: 3 ranks to the same
// checkpoint, then `--resume` on 2 — also when the machine freezes instead, holds rank 0 and the rendezvous
// host, or when two fail in a row; with a head agent hosting, rank 0's machine lost; a machine that comes
// back; the agents' two ways to give up, and a signal that stops the job. Emulation builds only.
#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
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

std::vector<std::string> reformation_records(const std::string& run) {
  std::vector<std::string> lines;
  if (!std::filesystem::exists(run + "/metrics.jsonl")) return lines;
  for (const std::string& line : read_lines(run + "/metrics.jsonl")) {
    if (line.find("\"event\": \"reformation\"") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// Whether a step was logged after the run's `count`-th re-formation: the new round trained.
bool stepped_after_reformation(const std::string& run, int count = 1) {
  if (!std::filesystem::exists(run + "/metrics.jsonl")) return false;
  int reformations = 0;
  for (const std::string& line : read_lines(run + "/metrics.jsonl")) {
    if (line.find("\"event\": \"reformation\"") != std::string::npos) ++reformations;
    if (reformations >= count && line.find("\"loss\": ") != std::string::npos) return true;
  }
  return false;
}

// The node rank the victim's agent held in the first round ("this machine node K").
int victim_node_rank(const std::vector<Machine>& machines, int victim) {
  std::smatch node;
  const std::string output = machines[static_cast<size_t>(victim)].output();
  if (!std::regex_search(output, node, std::regex("round 1: 3 node\\(s\\), this machine node (\\d)")))
    return -1;
  return std::stoi(node[1]);
}

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
LaunchRun run_three_machines(const std::string& recipe, const std::string& run, const Scenario& scenario) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  auto launch = [&](const std::string& nproc) {
    std::vector<std::string> arguments = {gpu_nanoforge_binary(), "launch", "--nproc-per-node=" + nproc,
                                          "--rdzv-endpoint=" + endpoint};
    arguments.insert(arguments.end(), scenario.launch_flags.begin(), scenario.launch_flags.end());
    arguments.push_back("--");
    for (const std::string& argument : train_command(recipe, run))
      arguments.push_back(argument);
    return arguments;
  };
  LaunchRun result;
  result.machines.reserve(4);  // no reallocation: Machine holds a file it reads back
  if (scenario.head) {
    result.head.emplace();
    result.head->start(launch("0"));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // it hosts
  }
  for (int i = 0; i < 3; ++i) {
    result.machines.emplace_back().start(launch("1"));
    if (i == 0 && !scenario.head) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // it hosts
  }
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  double signalled_at = -1, returned_at = -1;
  while (seconds() < kHardLimitSeconds) {
    if (signalled_at < 0 && scenario.victim != -1 && std::filesystem::exists(run + "/metrics.jsonl") &&
        losses_by_step(run).count(3) == 1 && !latest_checkpoint_name(run).empty()) {
      result.victim = scenario.victim;
      for (int i = 0; i < 3 && result.victim == kRankZeroMachine; ++i) {
        if (victim_node_rank(result.machines, i) == 0) result.victim = i;
      }
      Machine& target = result.machines[static_cast<size_t>(result.victim)];
      if (scenario.whole_group) {
        target.kill_group(scenario.signal);
      } else {
        ::kill(target.pid, scenario.signal);
      }
      signalled_at = seconds();
      std::printf("sent signal %d to machine %d's %s at %.2f s\n", scenario.signal, result.victim,
                  scenario.whole_group ? "process group" : "agent alone", signalled_at);
    }
    if (signalled_at >= 0 && result.death_to_first_step < 0 && stepped_after_reformation(run)) {
      result.death_to_first_step = seconds() - signalled_at;
      std::printf("death to the first step on the survivors: %.2f s\n", result.death_to_first_step);
    }
    if (scenario.returns && result.machines.size() == 3 && !reformation_records(run).empty()) {
      result.machines.emplace_back().start(launch("1"));
      returned_at = seconds();
      std::printf("machine %d's agent started again at %.2f s\n", result.victim, returned_at);
    }
    if (returned_at >= 0 && result.return_to_first_step < 0 && stepped_after_reformation(run, 2)) {
      result.return_to_first_step = seconds() - returned_at;
      std::printf("return to the first step with it: %.2f s\n", result.return_to_first_step);
    }
    bool done = !result.head || result.head->poll();
    for (size_t i = 0; i < result.machines.size(); ++i) {
      if (static_cast<int>(i) != result.victim || !scenario.whole_group)
        done = result.machines[i].poll() && done;
    }
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto reap = [](Machine& machine) {
    if (machine.poll()) return;
    machine.kill_group(SIGKILL);
    int status = 0;
    ::waitpid(machine.pid, &status, 0);
    machine.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  };
  for (Machine& machine : result.machines)
    reap(machine);
  if (result.head) reap(*result.head);
  return result;
}

// The agents' own lines, for the test's log.
void print_agent_lines(const LaunchRun& launch) {
  auto print = [](const Machine& machine, const std::string& name) {
    for (const std::string& line : std::vector<std::string>(absl::StrSplit(machine.output(), '\n'))) {
      if (line.rfind("nanoforge launch", 0) == 0) std::printf("%s: %s\n", name.c_str(), line.c_str());
    }
  };
  if (launch.head) print(*launch.head, "head");
  for (size_t i = 0; i < launch.machines.size(); ++i)
    print(launch.machines[i], "machine " + std::to_string(i));
}

std::string describe(const LaunchRun& launch) {
  std::string text = describe(launch.machines);
  if (launch.head) text += "--- head:\n" + launch.head->output();
  return text;
}

// A run's losses and final weights.
struct RunResult {
  std::map<int64_t, std::string> losses;
  std::map<std::string, std::vector<float>> weights;
};

// What a person does by hand: each segment on its world size up to its step (-1: the end), every segment
// after the first with `--resume`. Run once per list of segments in this program (the tests share them).
const RunResult& run_by_hand(const std::string& recipe,
                             const std::vector<std::pair<int, int64_t>>& segments) {
  static std::map<std::vector<std::pair<int, int64_t>>, RunResult> done;
  if (const auto it = done.find(segments); it != done.end()) return it->second;
  const std::string run = temp_dir(fmt::format("launch_by_hand_{}", done.size())) + "/run";
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
      EXPECT_EQ(rank.exit_code, 0) << test::describe(ranks);
  }
  std::printf("by hand, world sizes and steps");
  for (const auto& [world, stop_at] : segments)
    std::printf(" %d:%lld", world, static_cast<long long>(stop_at));
  std::printf(": %s\n", run.c_str());
  return done[segments] = RunResult{losses_by_step(run), final_weights(run)};
}

// The survivors (every machine but the victim) finished all kSteps steps with exit 0 after one re-formation
// on 2 machines, and the run equals, bit for bit, the run a person makes by hand from the checkpoint it
// resumed from: both are 2 ranks resuming the same 3-rank checkpoint, and the emulated NCCL reduces in a
// fixed order, so a tolerance would only hide a wrong world size, accumulation count or data position.
// Returns the step resumed from (-1 on a failure).
int64_t expect_finished_as_by_hand(const std::string& recipe, const std::string& run,
                                   const LaunchRun& launch) {
  std::string survivors_output;
  for (size_t i = 0; i < launch.machines.size(); ++i) {
    if (static_cast<int>(i) == launch.victim) continue;
    EXPECT_TRUE(launch.machines[i].exited) << "machine " << i << " hung\n" << describe(launch);
    EXPECT_EQ(launch.machines[i].exit_code, 0) << describe(launch);
    survivors_output += launch.machines[i].output();
  }
  if (launch.head) {
    EXPECT_EQ(launch.head->exit_code, 0) << describe(launch);
  }
  print_agent_lines(launch);
  std::smatch resumed;
  if (!std::regex_search(survivors_output, resumed,
                         std::regex("re-formed \\(round \\d+, restart 1 of at most 2\\) after [^\\n]*: 2 "
                                    "node\\(s\\) [^\\n]* resuming from step_0*(\\d+)"))) {
    ADD_FAILURE() << describe(launch);
    return -1;
  }
  const int64_t resumed_step = std::stoll(resumed[1]);
  std::printf("re-formed on 2 machines, resumed from step %lld\n", static_cast<long long>(resumed_step));
  EXPECT_NE(survivors_output.find(fmt::format("done: step {} of {}", kSteps, kSteps)), std::string::npos)
      << describe(launch);
  const std::map<int64_t, std::string> losses = losses_by_step(run);
  EXPECT_EQ(losses.size(), static_cast<size_t>(kSteps)) << describe(launch);
  // The re-formation, in metrics.jsonl at the step resumed from and on rank 0's console.
  const std::vector<std::string> records = reformation_records(run);
  if (records.size() != 1u) {
    ADD_FAILURE() << read_bytes(run + "/metrics.jsonl");
    return -1;
  }
  std::printf("%s\n", records[0].c_str());
  for (const std::string& field :
       {fmt::format("\"step\": {}", resumed_step), std::string("\"restart\": 1"),
        std::string("\"previous_world_size\": 3"), std::string("\"world_size\": 2")})
    EXPECT_NE(records[0].find(field), std::string::npos) << records[0];
  EXPECT_NE(survivors_output.find(fmt::format("re-formed by nanoforge launch (restart 1): world size 3 -> 2, "
                                              "nodes left: {}",
                                              victim_node_rank(launch.machines, launch.victim))),
            std::string::npos)
      << describe(launch);

  const RunResult& by_hand = run_by_hand(recipe, {{3, resumed_step}, {2, -1}});
  EXPECT_EQ(by_hand.losses, losses);
  EXPECT_TRUE(by_hand.weights == final_weights(run)) << "the final weights differ from the run by hand";
  return resumed_step;
}

const std::vector<std::string> kElasticFlags = {"--nnodes=2:3", "--max-restarts=2", "--join-timeout=60"};

// How far the losses of 3 ranks and of 2 from the same weights may differ, relative. Not bitwise: 3 ranks of
// 2 micro-batches and 2 of 3 sum the same 6 gradients in another grouping (fp32, then the emulated NCCL), and
// the bf16 matmuls of the next steps carry the last-bit differences on; the 5 steps after the resume differ
// by up to 5.4e-5 here. 1e-3 is 20x that, and 10x below what one wrong batch does to these steps' losses.
constexpr double kRegroupedLossTolerance = 1e-3;

TEST(LaunchAgents, MachineKilledMidStepTheSurvivorsFinishTheRunAsAResumeByHandWould) {
  const std::string dir = temp_dir("launch_machine_killed");
  const std::string recipe = write_recipe(dir);
  const LaunchRun launch =
      run_three_machines(recipe, dir + "/run", {.launch_flags = kElasticFlags, .victim = 2});
  ASSERT_EQ(launch.machines[2].signal, SIGKILL) << describe(launch);
  const int64_t resumed = expect_finished_as_by_hand(recipe, dir + "/run", launch);
  // The loss curve goes on as if nothing happened: against a run that never lost a machine, the same up to
  // the step resumed from, then within the regrouping's rounding (the curves, side by side, in the log).
  const RunResult& uninterrupted = run_by_hand(recipe, {{3, -1}});
  const std::map<int64_t, std::string> losses = losses_by_step(dir + "/run");
  ASSERT_EQ(uninterrupted.losses.size(), losses.size());
  for (const auto& [step, loss] : losses) {
    const std::string& expected = uninterrupted.losses.at(step);
    std::printf("step %lld: loss %s (interrupted) %s (uninterrupted)\n", static_cast<long long>(step),
                loss.c_str(), expected.c_str());
    if (step <= resumed) {
      EXPECT_EQ(loss, expected) << "step " << step;
    } else {
      EXPECT_NEAR(std::stod(loss), std::stod(expected), kRegroupedLossTolerance * std::stod(expected))
          << "step " << step;
    }
  }
}

// A frozen machine (SIGSTOP: a hang, a kernel stuck): its connection stays open, the survivors' ranks fail
// their collectives at the timeout (exit 75), and their agents re-form without it.
TEST(LaunchAgents, MachineFrozenMidStepTheSurvivorsFinishTheRunAsAResumeByHandWould) {
  const std::string dir = temp_dir("launch_machine_frozen");
  const std::string recipe = write_recipe(dir);
  const LaunchRun launch = run_three_machines(
      recipe, dir + "/run", {.launch_flags = kElasticFlags, .victim = 2, .signal = SIGSTOP});
  expect_finished_as_by_hand(recipe, dir + "/run", launch);
}

// The machine of rank 0, whose agent also hosts the rendezvous: the others see the host's connection close,
// one of them hosts from then on (it binds the endpoint's port), and rank 0 moves to another machine.
TEST(LaunchAgents, RendezvousHostAndRankZeroKilledTheOthersTakeOverAndFinish) {
  const std::string dir = temp_dir("launch_host_killed");
  const std::string recipe = write_recipe(dir);
  const LaunchRun launch =
      run_three_machines(recipe, dir + "/run", {.launch_flags = kElasticFlags, .victim = 0});
  ASSERT_EQ(launch.machines[0].signal, SIGKILL) << describe(launch);
  expect_finished_as_by_hand(recipe, dir + "/run", launch);
  EXPECT_NE(
      (launch.machines[1].output() + launch.machines[2].output()).find("after losing the rendezvous host"),
      std::string::npos)
      << describe(launch);
}

// The rendezvous on a machine that runs no rank (a head agent, --nproc-per-node 0): the machine holding
// rank 0 dies, the host sees it go, and the two others finish; the head agent exits 0 with the job.
TEST(LaunchAgents, RankZeroKilledWhileAHeadAgentHostsTheOthersFinish) {
  const std::string dir = temp_dir("launch_rank_zero_killed");
  const std::string recipe = write_recipe(dir);
  const LaunchRun launch = run_three_machines(
      recipe, dir + "/run", {.launch_flags = kElasticFlags, .victim = kRankZeroMachine, .head = true});
  ASSERT_GE(launch.victim, 0) << describe(launch);
  ASSERT_EQ(launch.machines[static_cast<size_t>(launch.victim)].signal, SIGKILL) << describe(launch);
  expect_finished_as_by_hand(recipe, dir + "/run", launch);
  EXPECT_NE(launch.head->output().find("serving the agents' rendezvous"), std::string::npos)
      << describe(launch);
}

// A machine that comes back (its agent started again with the same command after the survivors re-formed)
// is taken in at the next step: the agents stop their ranks with a checkpoint and re-form on 3, restarting
// nothing. The run equals, bit for bit, the one made by hand: 3 ranks, 2 from the first checkpoint, then 3
// again from the step the agents stopped at.
TEST(LaunchAgents, MachineThatComesBackIsTakenInAtTheNextStepAndTheRunFinishesAsByHand) {
  const std::string dir = temp_dir("launch_machine_returns");
  const std::string recipe = write_recipe(dir);
  const std::string run = dir + "/run";
  const LaunchRun launch =
      run_three_machines(recipe, run, {.launch_flags = kElasticFlags, .victim = 2, .returns = true});
  print_agent_lines(launch);
  ASSERT_EQ(launch.machines.size(), 4u) << describe(launch);
  for (size_t i : {0, 1, 3}) {
    ASSERT_TRUE(launch.machines[i].exited) << describe(launch);
    EXPECT_EQ(launch.machines[i].exit_code, 0) << describe(launch);
  }
  const std::vector<std::string> records = reformation_records(run);
  ASSERT_EQ(records.size(), 2u) << read_bytes(run + "/metrics.jsonl");
  EXPECT_NE(records[1].find("\"cause\": \"join\""), std::string::npos) << records[1];
  EXPECT_NE(records[1].find("\"restart\": 1, \"previous_world_size\": 2, \"world_size\": 3"),
            std::string::npos)
      << records[1];
  EXPECT_NE(records[1].find("\"nodes_joined\": \"2\""), std::string::npos) << records[1];
  EXPECT_NE(launch.machines[0].output().find("re-formed (round 3) to take in a machine"), std::string::npos)
      << describe(launch);
  EXPECT_NE(launch.machines[3].output().find("round 3: 3 node(s), this machine node 2"), std::string::npos)
      << describe(launch);
  const std::map<int64_t, std::string> losses = losses_by_step(run);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps)) << describe(launch);
  const RunResult& by_hand = run_by_hand(recipe, {{3, static_cast<int64_t>(number_after(records[0], "step"))},
                                                  {2, static_cast<int64_t>(number_after(records[1], "step"))},
                                                  {3, -1}});
  EXPECT_EQ(by_hand.losses, losses);
  EXPECT_TRUE(by_hand.weights == final_weights(run)) << "the final weights differ from the run by hand";
}

// MIN = 3: after the loss the survivors wait --join-timeout for a third machine, then both exit 1 with the
// host's reason, in one line.
TEST(LaunchAgents, FewerThanMinLeftTheAgentsExitNamingWhy) {
  const std::string dir = temp_dir("launch_below_min");
  const LaunchRun launch = run_three_machines(
      write_recipe(dir), dir + "/run",
      {.launch_flags = {"--nnodes=3:3", "--max-restarts=2", "--join-timeout=5"}, .victim = 2});
  print_agent_lines(launch);
  for (int i : {0, 1}) {
    const Machine& machine = launch.machines[static_cast<size_t>(i)];
    ASSERT_TRUE(machine.exited) << describe(launch);
    EXPECT_EQ(machine.exit_code, 1) << describe(launch);
    EXPECT_NE(machine.output().find("nanoforge launch: error: after 1 restart(s): the rendezvous host at "
                                    "127.0.0.1:"),
              std::string::npos)
        << describe(launch);
    EXPECT_NE(machine.output().find("refused: only 2 of at least 3 agents joined within --join-timeout 5 s"),
              std::string::npos)
        << describe(launch);
  }
}

// --max-restarts 0: the first failure ends both survivors with status 1 and the reason (this is also what
// the agents did before they restarted anything: the test above fails this way without the restart).
TEST(LaunchAgents, MaxRestartsReachedTheAgentsExitNamingWhy) {
  const std::string dir = temp_dir("launch_max_restarts");
  const LaunchRun launch = run_three_machines(
      write_recipe(dir), dir + "/run",
      {.launch_flags = {"--nnodes=2:3", "--max-restarts=0", "--join-timeout=60"}, .victim = 2});
  print_agent_lines(launch);
  for (int i : {0, 1}) {
    const Machine& machine = launch.machines[static_cast<size_t>(i)];
    ASSERT_TRUE(machine.exited) << describe(launch);
    EXPECT_EQ(machine.exit_code, 1) << describe(launch);
    EXPECT_NE(machine.output().find("and --max-restarts 0 allows no more restarts"), std::string::npos)
        << describe(launch);
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
  const LaunchRun launch = run_three_machines(
      recipe, run, {.launch_flags = flags, .victim = 1, .signal = SIGTERM, .whole_group = false});
  print_agent_lines(launch);
  for (const Machine& machine : launch.machines) {
    ASSERT_TRUE(machine.exited) << describe(launch);
    EXPECT_EQ(machine.exit_code, 0) << describe(launch);
  }
  const std::map<int64_t, std::string> stopped = losses_by_step(run);
  ASSERT_LT(stopped.size(), static_cast<size_t>(kSteps)) << describe(launch);
  EXPECT_EQ(latest_checkpoint_name(run), fmt::format("step_{:06d}", stopped.rbegin()->first))
      << describe(launch);
  std::string outputs;
  for (const Machine& machine : launch.machines)
    outputs += machine.output();
  EXPECT_EQ(outputs.find("re-formed"), std::string::npos) << describe(launch);

  const LaunchRun relaunched = run_three_machines(recipe, run, {.launch_flags = kElasticFlags});  // no victim
  for (const Machine& machine : relaunched.machines) {
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
  const auto start = Clock::now();
  int killed = 0;
  while (std::chrono::duration<double>(Clock::now() - start).count() < kHardLimitSeconds &&
         !machines[0].poll()) {
    const bool has_run = std::filesystem::exists(run + "/metrics.jsonl");
    if (killed == 0 && has_run && losses_by_step(run).count(3) == 1 && !latest_checkpoint_name(run).empty()) {
      machines[2].kill_group(SIGKILL);
      killed = 1;
    }
    if (killed == 1 && has_run && reformation_records(run).size() == 1) {
      const int64_t resumed = static_cast<int64_t>(number_after(reformation_records(run)[0], "step"));
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
  print_agent_lines({.machines = machines});
  ASSERT_EQ(killed, 2) << describe(machines);
  ASSERT_TRUE(machines[0].exited) << describe(machines);
  ASSERT_EQ(machines[0].exit_code, 0) << describe(machines);
  EXPECT_NE(machines[0].output().find("re-formed (round 3, restart 2 of at most 2)"), std::string::npos)
      << describe(machines);
  const std::vector<std::string> records = reformation_records(run);
  ASSERT_EQ(records.size(), 2u) << read_bytes(run + "/metrics.jsonl");
  EXPECT_NE(records[1].find("\"previous_world_size\": 2, \"world_size\": 1"), std::string::npos)
      << records[1];
  const std::map<int64_t, std::string> losses = losses_by_step(run);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps)) << describe(machines);

  const RunResult& by_hand = run_by_hand(recipe, {{3, static_cast<int64_t>(number_after(records[0], "step"))},
                                                  {2, static_cast<int64_t>(number_after(records[1], "step"))},
                                                  {1, -1}});
  EXPECT_EQ(by_hand.losses, losses);
  EXPECT_TRUE(by_hand.weights == final_weights(run)) << "the final weights differ from the run by hand";
}

}  // namespace
}  // namespace nanoforge
