// parse_launch_env: reads the launcher's variables; every number is validated and every error names the
// variable, what it held and what was expected.
#include "dist/launch_env.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <cstdlib>

#include "support/json_text.h"

namespace nanoforge {
namespace {

struct Variables {
  const char* rank;
  const char* world_size;
  const char* local_rank;
};

constexpr Variables kOpenMpiVariables = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK"};
constexpr Variables kTorchrunVariables = {"RANK", "WORLD_SIZE", "LOCAL_RANK"};
constexpr Variables kSlurmVariables = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

absl::StatusOr<int> parse_int(const EnvLookup& lookup, const char* name, int min_value, int max_value) {
  const std::optional<std::string> text = lookup(name);
  if (!text) return absl::InvalidArgumentError(fmt::format("{} is not set", name));
  int value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min_value || value > max_value) {
    return absl::InvalidArgumentError(fmt::format("{}={} is not a whole number in [{}, {}]", name,
                                                  json_string(*text), min_value, max_value));
  }
  return value;
}

// Rank, world size and local rank from one launcher's variables. A missing local rank is 0 (one process per
// machine, as on DGX Sparks); the GPU count check in the NCCL engine catches a wrong guess.
absl::StatusOr<LaunchEnv> parse_ranks(const EnvLookup& lookup, Launcher launcher, const Variables& names) {
  constexpr int kMaxRanks = 1 << 20;
  LaunchEnv env;
  env.launcher = launcher;
  absl::StatusOr<int> world_size = parse_int(lookup, names.world_size, 1, kMaxRanks);
  if (!world_size.ok()) return world_size.status();
  env.world_size = *world_size;
  absl::StatusOr<int> rank = parse_int(lookup, names.rank, 0, env.world_size - 1);
  if (!rank.ok()) return rank.status();
  env.rank = *rank;
  if (lookup(names.local_rank)) {
    absl::StatusOr<int> local_rank = parse_int(lookup, names.local_rank, 0, env.world_size - 1);
    if (!local_rank.ok()) return local_rank.status();
    env.local_rank = *local_rank;
  }
  return env;
}

absl::Status parse_master(const EnvLookup& lookup, LaunchEnv& env) {
  const std::optional<std::string> addr = lookup("MASTER_ADDR");
  const bool has_port = lookup("MASTER_PORT").has_value();
  if (env.world_size == 1 && !addr && !has_port) return absl::OkStatus();  // nothing to meet
  if (!addr || addr->empty() || !has_port) {
    return absl::InvalidArgumentError(fmt::format(
        "torchrun-style launch with WORLD_SIZE={} needs MASTER_ADDR and MASTER_PORT (where rank 0 listens "
        "for the rendezvous), found MASTER_ADDR={} MASTER_PORT={}",
        env.world_size, addr ? json_string(*addr) : "unset",
        lookup("MASTER_PORT") ? json_string(*lookup("MASTER_PORT")) : "unset"));
  }
  env.master_addr = *addr;
  absl::StatusOr<int> port = parse_int(lookup, "MASTER_PORT", 1, 65535);
  if (!port.ok()) return port.status();
  env.master_port = *port;
  return absl::OkStatus();
}

absl::StatusOr<LaunchEnv> with_context(absl::StatusOr<LaunchEnv> env, const char* launcher) {
  if (env.ok()) return env;
  return absl::InvalidArgumentError(
      fmt::format("reading the {} launch environment: {}", launcher, std::string(env.status().message())));
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNone:
      return "none";
    case Launcher::kOpenMpi:
      return "mpirun";
    case Launcher::kSlurm:
      return "srun";
    case Launcher::kTorchrun:
      return "torchrun";
  }
  return "?";
}

std::string LaunchEnv::describe() const {
  std::string text = fmt::format("rank {} of {} (local rank {})", rank, world_size, local_rank);
  if (launcher != Launcher::kNone) text += fmt::format(", launched by {}", launcher_name(launcher));
  if (launcher == Launcher::kTorchrun && !master_addr.empty())
    text += fmt::format(", rendezvous at {}:{}", master_addr, master_port);
  return text;
}

absl::StatusOr<LaunchEnv> parse_launch_env(const EnvLookup& lookup) {
  if (lookup(kOpenMpiVariables.rank) || lookup(kOpenMpiVariables.world_size))
    return with_context(parse_ranks(lookup, Launcher::kOpenMpi, kOpenMpiVariables), "Open MPI (mpirun)");
  if (lookup(kTorchrunVariables.rank) || lookup(kTorchrunVariables.world_size)) {
    absl::StatusOr<LaunchEnv> env = parse_ranks(lookup, Launcher::kTorchrun, kTorchrunVariables);
    if (env.ok()) {
      if (absl::Status master = parse_master(lookup, *env); !master.ok()) env = master;
    }
    return with_context(std::move(env), "torchrun-style");
  }
  if (lookup(kSlurmVariables.rank) || lookup(kSlurmVariables.world_size)) {
    // SLURM_NPROCS is the older name of SLURM_NTASKS.
    const bool has_ntasks = lookup("SLURM_NTASKS").has_value();
    const Variables names = {"SLURM_PROCID", has_ntasks ? "SLURM_NTASKS" : "SLURM_NPROCS", "SLURM_LOCALID"};
    return with_context(parse_ranks(lookup, Launcher::kSlurm, names), "Slurm (srun)");
  }
  return LaunchEnv{};
}

std::optional<std::string> process_env(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<LaunchEnv> launch_env_from_process() {
  return parse_launch_env(process_env);
}

std::string encode_launch_reformation(const LaunchReformation& r) {
  return fmt::format(
      "cause={};restart={};previous_world_size={};left={};stayed={};joined={};failure_unix_ms={}", r.cause,
      r.restart, r.previous_world_size, r.left, r.stayed, r.joined, r.failure_unix_ms);
}

absl::StatusOr<std::optional<LaunchReformation>> launch_reformation_from_env(const EnvLookup& lookup) {
  const std::optional<std::string> text = lookup(kLaunchReformationVariable);
  if (!text) return std::nullopt;
  LaunchReformation r;
  int found = 0;
  for (const absl::string_view field : absl::StrSplit(*text, ';')) {
    const size_t equals = field.find('=');
    if (equals == absl::string_view::npos) break;
    const absl::string_view key = field.substr(0, equals), value = field.substr(equals + 1);
    if (key == "cause" && (value == "failure" || value == "join")) r.cause = std::string(value), ++found;
    if (key == "restart" && absl::SimpleAtoi(value, &r.restart)) ++found;
    if (key == "previous_world_size" && absl::SimpleAtoi(value, &r.previous_world_size)) ++found;
    if (key == "failure_unix_ms" && absl::SimpleAtoi(value, &r.failure_unix_ms)) ++found;
    if (key == "left") r.left = std::string(value), ++found;
    if (key == "stayed") r.stayed = std::string(value), ++found;
    if (key == "joined") r.joined = std::string(value), ++found;
  }
  if (found != 7) {
    return absl::InvalidArgumentError(
        fmt::format("{}={} is not what nanoforge launch writes "
                    "(cause=failure|join;restart=N;previous_world_size=N;left=...;stayed=...;"
                    "joined=...;failure_unix_ms=N): a rank started by another nanoforge build?",
                    kLaunchReformationVariable, json_string(*text)));
  }
  return r;
}

}  // namespace nanoforge
