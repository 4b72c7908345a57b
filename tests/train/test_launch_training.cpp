// `nanoforge launch` (launch/agent.h) on 3 "machines" of this one: each agent in a process group of its own
// with its rank on an emulated GPU (torchrun-style NCCL: the CPU engine needs mpirun). One machine's whole
// process group is SIGKILLed in the middle of a step; the other two agents re-form and finish the run on 2
// ranks without any command, and the result is the run a person would have made by hand: 3 ranks to the same
// checkpoint, then `--resume` on 2 — also when the machine freezes instead, holds rank 0 and the rendezvous
// host, or when two fail in a row; with a head agent hosting, rank 0's machine lost; a machine that comes
// back; the agents' two ways to give up, and a signal that stops the job. Emulation builds only.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/dist/rank_processes.h"
#include "tests/test_paths.h"
#include "tests/train/launch_machines.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;
using Clock = std::chrono::steady_clock;

// The run equals, bit for bit, the one a person makes by hand on `world_sizes` ranks in turn, each segment
// but the last up to the step the run's next re-formation resumed from (metrics.jsonl's records, in order).
void expect_as_by_hand(const std::string& recipe, const std::string& run,
                       const std::vector<int>& world_sizes) {
  const std::vector<std::string> records = reformation_records(run);
  ASSERT_EQ(records.size() + 1, world_sizes.size()) << read_bytes(run + "/metrics.jsonl");
  std::vector<std::pair<int, int64_t>> segments;
  for (size_t i = 0; i < world_sizes.size(); ++i) {
    segments.emplace_back(world_sizes[i],
                          i < records.size() ? static_cast<int64_t>(number_after(records[i], "step")) : -1);
  }
  const RunResult& by_hand = run_by_hand(recipe, segments);
  EXPECT_EQ(by_hand.losses, losses_by_step(run));
  EXPECT_TRUE(by_hand.weights == final_weights(run)) << "the final weights differ from the run by hand";
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
  EXPECT_EQ(losses_by_step(run).size(), static_cast<size_t>(kSteps)) << describe(launch);
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

  expect_as_by_hand(recipe, run, {3, 2});
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

// A frozen machine (SIGSTOP: a hang, a machine without power): its connection stays open and silent, the
// survivors' ranks wait in their collective (dist.timeout_seconds is longer), the host ends the round after
// the agents' 10 s silence limit, and the survivors' agents kill their stuck ranks after --stop-grace and
// re-form without it.
TEST(LaunchAgents, MachineFrozenMidStepTheSurvivorsFinishTheRunAsAResumeByHandWould) {
  const std::string dir = temp_dir("launch_machine_frozen");
  const std::string recipe = write_recipe(dir);
  std::vector<std::string> flags = kElasticFlags;
  flags.push_back("--stop-grace=1");
  const LaunchRun launch =
      run_three_machines(recipe, dir + "/run", {.launch_flags = flags, .victim = 2, .signal = SIGSTOP});
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
  ASSERT_EQ(losses_by_step(run).size(), static_cast<size_t>(kSteps)) << describe(launch);
  expect_as_by_hand(recipe, run, {3, 2, 3});
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
  const std::string endpoint = free_endpoint();
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
  ASSERT_EQ(losses_by_step(run).size(), static_cast<size_t>(kSteps)) << describe(machines);
  expect_as_by_hand(recipe, run, {3, 2, 1});
}

}  // namespace
}  // namespace nanoforge
