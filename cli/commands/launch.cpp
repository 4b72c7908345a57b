// `nanoforge launch --nnodes MIN:MAX --nproc-per-node N --rdzv-endpoint HOST:PORT [--max-restarts K]
// [--join-timeout S] [--stop-grace S] -- train ...`: one per machine; checks its flags, then runs the elastic
// agent (launch/agent.h), which starts the ranks with this program and the command after `--`. The ranks'
// recipe is read first, as train reads it: a world size in MIN:MAX its batch does not divide is refused here,
// not by the ranks of a round on it (which the agents would take for a failure, and re-form on again).
#include <absl/flags/flag.h>
#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <numeric>
#include <string>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/flag_limits.h"
#include "launch/agent.h"
#include "support/status.h"
#include "train/batch_split.h"

ABSL_FLAG(std::string, nnodes, "", "MIN:MAX machines (or N): the job runs on as many as join, at least MIN");
ABSL_FLAG(
    int64_t, nproc_per_node, 1,
    "ranks on this machine, one per GPU (1 on a DGX Spark); 0: only serve the agents' rendezvous, on the "
    "endpoint's machine, so that every machine with ranks may be lost");
NANOFORGE_FLAG_LIMIT(nproc_per_node, 0, 1024, "(ranks on this machine; 0 serves the rendezvous only)");
ABSL_FLAG(std::string, rdzv_endpoint, "",
          "HOST:PORT of the agents' rendezvous, the same on every machine; the agent on HOST serves it, and "
          "rank 0 of each round listens on PORT + 1 of its machine");
ABSL_FLAG(int64_t, max_restarts, 3, "re-formations after a failure before the agents give up");
NANOFORGE_FLAG_LIMIT(max_restarts, 0, 1e6, "(restarts)");
ABSL_FLAG(double, join_timeout, 600,
          "seconds a round waits for MIN machines (at the start and after each failure) before giving up");
NANOFORGE_FLAG_LIMIT(join_timeout, 1, 1e6, "(seconds)");
ABSL_FLAG(
    double, stop_grace, 10,
    "seconds between SIGTERM and SIGKILL when the agent stops its ranks (and before it passes a signal of "
    "its own on to them)");
NANOFORGE_FLAG_LIMIT(stop_grace, 0, 3600, "(seconds)");

namespace nanoforge {
namespace {

// The least multiple of every world size the job may form on (count x N), or 0 past this (no sensible batch).
constexpr int64_t kMaxSuggestedMultiple = int64_t{1} << 50;
int64_t common_multiple(const LaunchOptions& options) {
  int64_t multiple = 1;
  for (int64_t count = options.min_nodes; count <= options.max_nodes && multiple != 0; ++count) {
    multiple = std::lcm(multiple, count * options.nproc_per_node);
    if (multiple > kMaxSuggestedMultiple) multiple = 0;
  }
  return multiple;
}

// Every machine count from MIN to MAX must give a world size (count x N) the ranks' global batch divides on:
// the recipe and its overrides from the command after `--`, loaded and checked as `nanoforge train` does.
absl::Status check_world_sizes(const LaunchOptions& options) {
  const std::string recipe_path = flag_value(options.command, "recipe");
  if (recipe_path.empty() || options.run_dir.empty()) {
    return absl::InvalidArgumentError(
        "the ranks' command: --recipe and --run-dir are both required (see nanoforge train --help)");
  }
  const std::vector<std::string> words = positional_words(options.command);
  NANOFORGE_ASSIGN_OR_RETURN(const Recipe recipe, load_recipe(recipe_path, {words.begin() + 1, words.end()}));
  NANOFORGE_RETURN_IF_ERROR(validate_recipe(recipe));
  NANOFORGE_ASSIGN_OR_RETURN(const BatchSplit split, recipe_batch_split(recipe));
  const int64_t n = options.nproc_per_node;
  int64_t refused = 0;  // the first machine count whose world size the batch does not divide
  int64_t run_low = 0, run_high = -1, low = 0;  // the longest run of counts that divide, for an example
  for (int64_t count = options.min_nodes; count <= options.max_nodes; ++count) {
    if (split.divides_on(count * n)) {
      if (low == 0) low = count;
      if (count - low > run_high - run_low) run_low = low, run_high = count;
    } else {
      if (refused == 0) refused = count;
      low = 0;
    }
  }
  if (refused == 0) return absl::OkStatus();
  const std::string batch =
      recipe.train.horizon.total_batch_size > 0
          ? fmt::format("train.total_batch_size {}", split.total_batch_size)
          : fmt::format("train.total_batch_size -1 (nanochat's power law: {})", split.total_batch_size);
  std::string fixes = fmt::format(
      "choose MIN:MAX so that every count x {} is among those{}", n,
      run_high >= run_low ? fmt::format(" (e.g. --nnodes {}:{})", run_low, run_high) : std::string());
  if (const int64_t multiple = common_multiple(options); multiple != 0) {
    fixes += fmt::format(
        ", or set train.total_batch_size to a multiple of device_batch_size {} x max_seq_len {} x {} = {}",
        recipe.train.device_batch_size, recipe.model.max_seq_len, multiple, split.rank_tokens * multiple);
  }
  return absl::InvalidArgumentError(fmt::format(
      "--nnodes {}:{} with --nproc-per-node {}: {} does not divide on {} machine{} (world size {}): it "
      "divides on world sizes {} (up to {}); {}",
      options.min_nodes, options.max_nodes, n, batch, refused, refused == 1 ? "" : "s", refused * n,
      split.dividing_world_sizes(), kMaxListedWorldSize, fixes));
}

absl::Status run_launch_command(const std::vector<std::string>& command) {
  LaunchOptions options;
  if (absl::GetFlag(FLAGS_nnodes).empty() || absl::GetFlag(FLAGS_rdzv_endpoint).empty()) {
    return absl::InvalidArgumentError(
        "--nnodes and --rdzv-endpoint are both required (see nanoforge launch --help)");
  }
  NANOFORGE_RETURN_IF_ERROR(parse_nnodes(absl::GetFlag(FLAGS_nnodes), options));
  NANOFORGE_RETURN_IF_ERROR(parse_rdzv_endpoint(absl::GetFlag(FLAGS_rdzv_endpoint), options));
  options.nproc_per_node = static_cast<int>(absl::GetFlag(FLAGS_nproc_per_node));
  if (command.empty() && options.nproc_per_node > 0) {
    return absl::InvalidArgumentError(
        "no command for the ranks: end the flags with `--` and the command, e.g. "
        "`nanoforge launch --nnodes 2:3 --rdzv-endpoint node1:29400 -- train --recipe r.toml --run-dir "
        "runs/x`");
  }
  if (!command.empty() && command.front() != "train") {
    return absl::InvalidArgumentError(fmt::format(
        "the ranks' command is `{}`: launch restarts `train` runs (resuming from their checkpoints), so the "
        "command after `--` must begin with train",
        command.front()));
  }
  options.max_restarts = static_cast<int>(absl::GetFlag(FLAGS_max_restarts));
  options.join_timeout_seconds = absl::GetFlag(FLAGS_join_timeout);
  options.stop_grace_seconds = absl::GetFlag(FLAGS_stop_grace);
  options.command = command;
  options.run_dir = flag_value(command, "run_dir");
  if (options.nproc_per_node > 0) NANOFORGE_RETURN_IF_ERROR(check_world_sizes(options));
  char program[PATH_MAX] = {};
  const ssize_t length = ::readlink("/proc/self/exe", program, sizeof(program) - 1);
  if (length <= 0) return absl::InternalError("cannot find this program's path (/proc/self/exe)");
  options.program.assign(program, static_cast<size_t>(length));
  return run_launch_agent(options);
}

}  // namespace

Command launch_command() {
  Command command{
      "launch",
      "start this machine's ranks, and re-form the job from the machines still alive when one dies",
      "--nnodes MIN:MAX --rdzv-endpoint HOST:PORT [--nproc-per-node N] [--max-restarts K] "
      "[--join-timeout S] [--stop-grace S] -- train --recipe FILE --run-dir DIR ...\n\n"
      "One agent per machine, each with the same flags and NANOFORGE_RENDEZVOUS_SECRET "
      "(docs/launch.md).",
      {"nnodes", "nproc_per_node", "rdzv_endpoint", "max_restarts", "join_timeout", "stop_grace"},
      run_launch_command};
  command.takes_command = true;
  return command;
}

}  // namespace nanoforge
