// The elastic launch agent, one per machine (`nanoforge launch`, like torchrun's): joins a membership round
// with the other machines' agents (dist/agent_rendezvous.h), starts this machine's ranks with the
// torchrun-style environment the trainer reads, watches them and the other agents, and on a failure (or a
// machine asking to join) stops its ranks and joins the next round, whose ranks resume from the run's last
// checkpoint at the new world size. docs/launch.md gives the protocol and its limits.
#pragma once

#include <absl/status/status.h>

#include <string>
#include <vector>

namespace nanoforge {

struct LaunchOptions {
  int min_nodes = 1;  // --nnodes MIN:MAX
  int max_nodes = 1;
  int nproc_per_node = 1;  // 0: a head agent, which only serves the rendezvous
  std::string rdzv_host;   // --rdzv-endpoint HOST:PORT; the ranks' rank 0 listens on PORT + 1
  int rdzv_port = 0;
  int max_restarts = 3;
  double join_timeout_seconds = 600;
  double stop_grace_seconds = 10;     // SIGTERM, then SIGKILL after this
  double agent_silence_seconds = 10;  // an agent not heard from for this long is lost
  std::string program;                // what the ranks run: this program
  std::vector<std::string> command;   // its arguments, from after `--` ("train", "--recipe", ...)
  std::string run_dir;                // the command's --run-dir: where the agent finds checkpoints/latest
};

// "MIN:MAX" or "N" into options.min_nodes/max_nodes; HOST:PORT into rdzv_host/rdzv_port. Errors say what
// was expected and what was found.
absl::Status parse_nnodes(const std::string& text, LaunchOptions& options);
absl::Status parse_rdzv_endpoint(const std::string& text, LaunchOptions& options);

// Runs the agent until the job finishes (OK), or fails: too many restarts, fewer than MIN machines within
// the join timeout, no rendezvous host. The status names why, in one line.
absl::Status run_launch_agent(const LaunchOptions& options);

}  // namespace nanoforge
