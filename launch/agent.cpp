// The launch agent's loop: host the rendezvous if it is ours to host, join a round, start the ranks, watch
// them (waitpid) and the round (the link's verdicts), stop them (SIGTERM, then SIGKILL after the grace) and
// join again, until the job finishes or a limit is reached. A rank is this program run with the command
// after `--`, plus `--resume` once the run directory holds a checkpoint.
#include "launch/agent.h"

#include <absl/strings/numbers.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "dist/agent_rendezvous.h"
#include "dist/comm_watchdog.h"
#include "dist/launch_env.h"
#include "dist/rendezvous_protocol.h"
#include "support/status.h"
#include "support/stop_signal.h"

extern char** environ;

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kWatchTickSeconds = 0.1;

double seconds_since(Clock::time_point then) {
  return std::chrono::duration<double>(Clock::now() - then).count();
}

// What the ranks must not inherit: another launcher's variables would take precedence over ours
// (dist/launch_env.h reads mpirun's first).
bool is_launcher_variable(const std::string& entry) {
  for (const char* prefix : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "MASTER_ADDR=", "MASTER_PORT=",
                             "OMPI_COMM_WORLD_", "PMIX_RANK=", "NANOFORGE_LAUNCH_REFORMATION="}) {
    if (entry.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The run's latest checkpoint's name ("step_000004"), or "" when it has none yet.
std::string latest_checkpoint(const std::string& run_dir) {
  if (run_dir.empty()) return "";
  std::ifstream file(std::filesystem::path(run_dir) / "checkpoints" / "latest");
  std::string name;
  file >> name;
  return name;
}

struct Rank {
  pid_t pid = -1;
  int rank = 0;
  bool running = true;
  int status = 0;
};

class Ranks {
 public:
  Ranks(const LaunchOptions& options, const AgentMembership& membership, bool resume,
        const std::optional<LaunchReformation>& reformation) {
    const int world_size = membership.nnodes * membership.nproc_per_node;
    std::vector<std::string> arguments = {options.program};
    arguments.insert(arguments.end(), options.command.begin(), options.command.end());
    if (resume) arguments.push_back("--resume");
    for (int local = 0; local < membership.nproc_per_node; ++local) {
      const int rank = membership.node_rank * membership.nproc_per_node + local;
      std::vector<std::string> environment;
      for (char** entry = environ; *entry != nullptr; ++entry) {
        if (!is_launcher_variable(*entry)) environment.push_back(*entry);
      }
      environment.push_back(fmt::format("RANK={}", rank));
      environment.push_back(fmt::format("WORLD_SIZE={}", world_size));
      environment.push_back(fmt::format("LOCAL_RANK={}", local));
      environment.push_back("MASTER_ADDR=" + membership.master_addr);
      environment.push_back(fmt::format("MASTER_PORT={}", membership.master_port));
      if (reformation) {
        environment.push_back(
            fmt::format("{}={}", kLaunchReformationVariable, encode_launch_reformation(*reformation)));
      }
      const pid_t parent = ::getpid();
      const pid_t pid = ::fork();
      if (pid == 0) {
        // A rank outlives no agent: if this agent dies alone, its ranks die with it.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        std::vector<char*> argv, envp;
        for (std::string& argument : arguments)
          argv.push_back(argument.data());
        argv.push_back(nullptr);
        for (std::string& entry : environment)
          envp.push_back(entry.data());
        envp.push_back(nullptr);
        ::execve(argv[0], argv.data(), envp.data());
        std::fprintf(stderr, "nanoforge launch: cannot run %s\n", argv[0]);
        ::_exit(127);
      }
      ranks_.push_back({.pid = pid, .rank = rank});
    }
  }
  ~Ranks() { stop(0); }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  // Reaps the ranks that ended; the first failure, described, or "".
  std::string reap() {
    for (Rank& rank : ranks_) {
      if (!rank.running || ::waitpid(rank.pid, &rank.status, WNOHANG) != rank.pid) continue;
      rank.running = false;
      if (failure_.empty() && !(WIFEXITED(rank.status) && WEXITSTATUS(rank.status) == 0)) {
        failure_ = WIFEXITED(rank.status)
                       ? fmt::format("rank {} exited with status {}", rank.rank, WEXITSTATUS(rank.status))
                       : fmt::format("rank {} was killed by signal {}", rank.rank, WTERMSIG(rank.status));
      }
    }
    return failure_;
  }
  bool all_finished() const {
    for (const Rank& rank : ranks_) {
      if (rank.running || !WIFEXITED(rank.status) || WEXITSTATUS(rank.status) != 0) return false;
    }
    return true;
  }
  // After a stop to take a machine in: whether every rank ended as a stop does — 0 at a step with a
  // checkpoint, 128 + SIGTERM in its start-up, 75 when a peer's start-up ended so — rather than by a fault.
  // Any of these leaves the round's checkpoint or a later one, so nothing is lost.
  bool all_stopped_for_join() const {
    for (const Rank& rank : ranks_) {
      const bool stop_status = WIFEXITED(rank.status) && (WEXITSTATUS(rank.status) == 0 ||
                                                          WEXITSTATUS(rank.status) == kCommFailureExitCode ||
                                                          WEXITSTATUS(rank.status) == 128 + SIGTERM);
      if (rank.running || !stop_status) return false;
    }
    return true;
  }
  // SIGTERM to the ranks still running (the trainer's stop at its next step, with a checkpoint).
  void terminate() {
    for (const Rank& rank : ranks_) {
      if (rank.running) ::kill(rank.pid, SIGTERM);
    }
  }
  // SIGTERM to the ranks still running, SIGKILL to those left after `grace_seconds`; `while_waiting` runs
  // every tick meanwhile (the agent's heartbeat).
  void stop(
      double grace_seconds, const std::function<void()>& while_waiting = [] {}) {
    terminate();
    const auto start = Clock::now();
    while (seconds_since(start) < grace_seconds && running()) {
      reap();
      while_waiting();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (Rank& rank : ranks_) {
      if (!rank.running) continue;
      ::kill(rank.pid, SIGKILL);
      ::waitpid(rank.pid, &rank.status, 0);
      rank.running = false;
    }
  }

 private:
  bool running() const {
    for (const Rank& rank : ranks_) {
      if (rank.running) return true;
    }
    return false;
  }
  std::vector<Rank> ranks_;
  std::string failure_;
};

// Who left, who stayed and who joined, from this round's previous node ranks.
LaunchReformation reformation_of(const AgentMembership& membership, const std::string& cause, int restart,
                                 int previous_world_size, int previous_nnodes,
                                 std::chrono::system_clock::time_point failure) {
  LaunchReformation r{
      .cause = cause,
      .restart = restart,
      .previous_world_size = previous_world_size,
      .left = "",
      .stayed = "",
      .joined = "",
      .failure_unix_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(failure.time_since_epoch()).count()};
  auto append = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : " ") + item; };
  std::vector<bool> present(static_cast<size_t>(std::max(previous_nnodes, 0)), false);
  for (int node = 0; node < membership.nnodes; ++node) {
    const int previous = membership.previous_node_ranks[static_cast<size_t>(node)];
    if (previous < 0) {
      append(r.joined, std::to_string(node));
    } else {
      append(r.stayed, fmt::format("{}->{}", previous, node));
      if (previous < previous_nnodes) present[static_cast<size_t>(previous)] = true;
    }
  }
  for (size_t node = 0; node < present.size(); ++node) {
    if (!present[node]) append(r.left, std::to_string(node));
  }
  return r;
}

// A signal to the agent (Ctrl-C, Slurm's preemption) stops the job instead of ending the agent at once: a
// second one does (docs/launch.md, "Stopping").
constexpr StopSignalMessages kAgentStopMessages = {
    nullptr, "\nnanoforge launch: stopping: the ranks stop at their next step with a checkpoint\n",
    "\nnanoforge launch: second signal: exiting now, and the ranks with it\n"};

std::string or_none(const std::string& list) {
  return list.empty() ? "none" : list;
}

}  // namespace

absl::Status parse_nnodes(const std::string& text, LaunchOptions& options) {
  const size_t colon = text.find(':');
  const std::string low = text.substr(0, colon);
  const std::string high = colon == std::string::npos ? low : text.substr(colon + 1);
  if (!absl::SimpleAtoi(low, &options.min_nodes) || !absl::SimpleAtoi(high, &options.max_nodes) ||
      options.min_nodes < 1 || options.max_nodes < options.min_nodes) {
    return absl::InvalidArgumentError(fmt::format(
        "--nnodes \"{}\": expected MIN:MAX (or N), whole numbers with 1 <= MIN <= MAX, e.g. 2:3", text));
  }
  return absl::OkStatus();
}

absl::Status parse_rdzv_endpoint(const std::string& text, LaunchOptions& options) {
  const size_t colon = text.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(text.substr(colon + 1), &port) ||
      port < 1 || port > 65534) {
    return absl::InvalidArgumentError(fmt::format(
        "--rdzv-endpoint \"{}\": expected HOST:PORT with PORT in [1, 65534] (the ranks' rank 0 listens on "
        "PORT + 1), e.g. node1:29400",
        text));
  }
  options.rdzv_host = text.substr(0, colon);
  if (options.rdzv_host.size() >= 2 && options.rdzv_host.front() == '[')
    options.rdzv_host = options.rdzv_host.substr(1, options.rdzv_host.size() - 2);
  options.rdzv_port = port;
  return absl::OkStatus();
}

namespace {

// --nproc-per-node 0: this agent serves the rendezvous and runs no rank, until the job is over.
absl::Status run_rendezvous_only(const LaunchOptions& options, const AgentRendezvousOptions& rendezvous) {
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<AgentRendezvousHost> host,
                             AgentRendezvousHost::start_if_here(rendezvous));
  if (!host) {
    return absl::FailedPreconditionError(fmt::format(
        "--nproc-per-node 0 serves the agents' rendezvous and runs no rank, but --rdzv-endpoint {}:{} is not "
        "this machine's, or another process holds its port: run it on the endpoint's machine, once",
        options.rdzv_host, options.rdzv_port));
  }
  std::printf("nanoforge launch: serving the agents' rendezvous on port %d (no rank on this machine)\n",
              options.rdzv_port);
  std::fflush(stdout);
  while (stop_signal() == 0) {
    if (std::optional<absl::Status> outcome = host->job_outcome()) return *outcome;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::CancelledError(fmt::format("stopped by signal {}", stop_signal()));
}

// How a round ended for this agent, and what it means for the next.
struct RoundEnd {
  std::string why;         // "rank 1 exited with status 75", "node 2 (10.0.0.7) closed its connection", ...
  bool failure = true;     // false: the ranks stopped with a checkpoint to take a machine in
  Clock::time_point at{};  // when this agent learnt it
  std::chrono::system_clock::time_point wall{};  // the same moment, for the ranks' record
};

// Watches a round's ranks and the host's verdicts until the round ends (its end, the ranks stopped), the job
// finishes (nullopt) or a signal stops it (an error).
absl::StatusOr<std::optional<RoundEnd>> watch_round(const LaunchOptions& options, AgentLink& link,
                                                    Ranks& ranks) {
  const auto heartbeat = [&link] { link.poll(0); };
  bool reported_failure = false, reported_done = false, forwarded_signal = false;
  std::string failure;
  Clock::time_point signalled{};
  while (true) {
    const AgentVerdict verdict = link.poll(kWatchTickSeconds);
    // A signal: the ranks have it too when it came from a terminal or Slurm, and stop at their next step;
    // when it was this agent's alone, they get SIGTERM after the grace (never twice: a second ends them).
    if (stop_signal() != 0 && signalled == Clock::time_point{}) signalled = Clock::now();
    if (signalled != Clock::time_point{} && !forwarded_signal &&
        seconds_since(signalled) > options.stop_grace_seconds) {
      ranks.terminate();
      forwarded_signal = true;
    }
    failure = ranks.reap();
    if (!failure.empty() && !reported_failure) {
      std::fprintf(stderr, "nanoforge launch: node %d: %s\n", link.membership().node_rank, failure.c_str());
      link.report_failed();
      reported_failure = true;
    }
    if (ranks.all_finished() && !reported_done) {
      link.report_done();
      reported_done = true;
    }
    if (verdict == AgentVerdict::kFinished && ranks.all_finished()) return std::nullopt;
    if (verdict == AgentVerdict::kNone) continue;
    if (signalled != Clock::time_point{}) {
      ranks.stop(options.stop_grace_seconds);
      return absl::CancelledError(fmt::format(
          "stopped by signal {} before the job finished; a launch with the same command resumes it",
          stop_signal()));
    }
    RoundEnd end{.why = "", .failure = true, .at = Clock::now(), .wall = std::chrono::system_clock::now()};
    if (verdict == AgentVerdict::kJoin && !reported_failure) {
      // The ranks stop at their next step with a checkpoint (the trainer's stop vote): nothing is lost.
      // However long that step takes, the join timeout bounds it.
      ranks.stop(options.join_timeout_seconds, heartbeat);
      end.failure = !ranks.all_stopped_for_join();
      end.why = !end.failure            ? "a machine asking to join"
                : !ranks.reap().empty() ? ranks.reap()
                                        : "a rank that did not stop within --join-timeout";
      return end;
    }
    end.why = verdict == AgentVerdict::kHostLost ? "losing the rendezvous host"
              : reported_failure                 ? failure
              : link.verdict_reason().empty()    ? "another node's failure"
                                                 : link.verdict_reason();
    ranks.stop(options.stop_grace_seconds, heartbeat);
    return end;
  }
}

// The round's line on this agent's console; after the first, what changed, which the ranks record too.
std::optional<LaunchReformation> announce_round(const LaunchOptions& options,
                                                const AgentMembership& membership,
                                                const std::string& checkpoint,
                                                const std::optional<RoundEnd>& last_end, int restarts,
                                                int previous_world_size, int previous_nnodes) {
  const int world_size = membership.nnodes * membership.nproc_per_node;
  std::optional<LaunchReformation> reformation;
  if (!last_end) {
    std::printf("nanoforge launch: round %d: %d node(s), this machine node %d, ranks %d..%d of %d%s\n",
                membership.round, membership.nnodes, membership.node_rank,
                membership.node_rank * membership.nproc_per_node,
                (membership.node_rank + 1) * membership.nproc_per_node - 1, world_size,
                checkpoint.empty() ? "" : fmt::format(", resuming from {}", checkpoint).c_str());
  } else {
    reformation = reformation_of(membership, last_end->failure ? "failure" : "join", restarts,
                                 previous_world_size, previous_nnodes, last_end->wall);
    const std::string after =
        last_end->failure ? fmt::format("(round {}, restart {} of at most {}) after {}", membership.round,
                                        restarts, options.max_restarts, last_end->why)
                          : fmt::format("(round {}) to take in a machine", membership.round);
    std::printf(
        "nanoforge launch: re-formed %s: %d node(s) (left: %s; stayed: %s; joined: %s), this machine node "
        "%d, world size %d, resuming from %s, %.1f s after the %s\n",
        after.c_str(), membership.nnodes, or_none(reformation->left).c_str(),
        or_none(reformation->stayed).c_str(), or_none(reformation->joined).c_str(), membership.node_rank,
        world_size, checkpoint.empty() ? "the start" : checkpoint.c_str(), seconds_since(last_end->at),
        last_end->failure ? "failure" : "stop");
  }
  std::fflush(stdout);
  return reformation;
}

}  // namespace

absl::Status run_launch_agent(const LaunchOptions& options) {
  NANOFORGE_ASSIGN_OR_RETURN(const RendezvousKey job_key, rendezvous_key_from_env(process_env));
  install_stop_handlers(OnStopSignal::kAskToStop, kAgentStopMessages);
  AgentRendezvousOptions rendezvous{.host = options.rdzv_host,
                                    .port = options.rdzv_port,
                                    .min_nodes = options.min_nodes,
                                    .max_nodes = options.max_nodes,
                                    .join_timeout_seconds = options.join_timeout_seconds,
                                    .silence_seconds = options.agent_silence_seconds,
                                    .key = agents_rendezvous_key(job_key)};
  if (options.nproc_per_node == 0) return run_rendezvous_only(options, rendezvous);
  std::unique_ptr<AgentRendezvousHost> host;
  std::optional<AgentLink> link;  // the last round's, open until the next round takes this agent in
  int previous_node_rank = -1, previous_nnodes = 0, previous_world_size = 0, restarts = 0;
  std::optional<RoundEnd> last_end;  // none before the first round
  while (true) {
    // The host of the last round may be gone: an agent of the endpoint's machine takes over.
    if (!host) {
      NANOFORGE_ASSIGN_OR_RETURN(host, AgentRendezvousHost::start_if_here(rendezvous));
    }
    absl::StatusOr<AgentLink> joined =
        AgentLink::join(rendezvous, options.nproc_per_node, previous_node_rank);
    if (!joined.ok()) {
      return absl::Status(joined.status().code(),
                          fmt::format("{}{}", last_end ? fmt::format("after {} restart(s): ", restarts) : "",
                                      std::string(joined.status().message())));
    }
    link = std::move(*joined);
    const AgentMembership& membership = link->membership();
    const std::string checkpoint = latest_checkpoint(options.run_dir);
    const std::optional<LaunchReformation> reformation = announce_round(
        options, membership, checkpoint, last_end, restarts, previous_world_size, previous_nnodes);
    previous_node_rank = membership.node_rank;
    previous_nnodes = membership.nnodes;
    previous_world_size = membership.nnodes * membership.nproc_per_node;
    Ranks ranks(options, membership, !checkpoint.empty(), reformation);
    NANOFORGE_ASSIGN_OR_RETURN(last_end, watch_round(options, *link, ranks));
    if (!last_end) return absl::OkStatus();  // the job finished
    if (stop_signal() != 0) {                // a signal while the round ended: restart nothing
      return absl::CancelledError(fmt::format(
          "stopped by signal {} while re-forming ({}); a launch with the same command resumes the run",
          stop_signal(), last_end->why));
    }
    if (last_end->failure && ++restarts > options.max_restarts) {
      return absl::AbortedError(
          fmt::format("stopped: the job failed ({}) and --max-restarts {} allows no more restarts",
                      last_end->why, options.max_restarts));
    }
  }
}

}  // namespace nanoforge
