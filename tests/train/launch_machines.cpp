// The launch tests' machines (launch_machines.h): agents started as this program's `launch`, signalled
// mid-step, waited for; and the runs made by hand with torchrun-style ranks, once per process.
#include "tests/train/launch_machines.h"

#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <regex>
#include <thread>

#include "tests/dist/rank_processes.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"

namespace nanoforge::test {
namespace {

using Clock = std::chrono::steady_clock;

// dist.timeout_seconds of these runs: long enough for a rank that waits on a peer still starting up on a
// loaded 2-core machine (2 s was not, in a by-hand run beside a build); a killed peer is found at once (its
// sockets close), a frozen one by the agents' 10 s silence limit.
constexpr double kTimeoutSeconds = 30;
constexpr const char* kSecret = "NANOFORGE_RENDEZVOUS_SECRET=launch-test-secret-0123456789";

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

}  // namespace

void Machine::start(const std::vector<std::string>& arguments) {
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

bool Machine::poll() {
  int status = 0;
  if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) {
    exited = true;
    if (WIFEXITED(status)) exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) signal = WTERMSIG(status);
  }
  return exited;
}

void Machine::kill_group(int sig) {
  ::kill(-pid, sig);
}

std::string Machine::output() const {
  return read_bytes(output_path);
}

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

std::string free_endpoint() {
  constexpr int kLowest = 20000, kHighest = 32000;  // below Linux's default ephemeral range, 32768-60999
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(kLowest, kHighest);
  auto bindable = [](int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    ::close(fd);
    return bound;
  };
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = pick(random);
    if (bindable(port) && bindable(port + 1)) return "127.0.0.1:" + std::to_string(port);
  }
  ADD_FAILURE() << "no two free ports next to each other in [" << kLowest << ", " << kHighest << "]";
  return "127.0.0.1:" + std::to_string(kLowest);
}

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

int victim_node_rank(const std::vector<Machine>& machines, int victim) {
  std::smatch node;
  const std::string output = machines[static_cast<size_t>(victim)].output();
  if (!std::regex_search(output, node, std::regex("round 1: 3 node\\(s\\), this machine node (\\d)")))
    return -1;
  return std::stoi(node[1]);
}

LaunchRun run_three_machines(const std::string& recipe, const std::string& run, const Scenario& scenario) {
  const std::string endpoint = free_endpoint();
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

}  // namespace nanoforge::test
