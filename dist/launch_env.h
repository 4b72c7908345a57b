// How this process was started, read from the environment before any communication library is touched:
// Open MPI's mpirun (OMPI_COMM_WORLD_*), Slurm's srun (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID),
// torchrun-style variables (RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT), or none (one
// process). Parsing takes a lookup function so tests can feed recorded environments.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace nanoforge {

enum class Launcher { kNone, kOpenMpi, kSlurm, kTorchrun };

const char* launcher_name(Launcher launcher);  // "none", "mpirun", "srun", "torchrun"

struct LaunchEnv {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this machine: the GPU this rank binds
  // torchrun-style only: where rank 0 listens for the rendezvous (dist/tcp_rendezvous.h).
  std::string master_addr;
  int master_port = 0;

  // Launched by an MPI-capable launcher: MPI_Init will find the job's other processes.
  bool launched_by_mpi() const { return launcher == Launcher::kOpenMpi || launcher == Launcher::kSlurm; }
  std::string describe() const;  // "rank 1 of 4 (local rank 1), launched by mpirun"
};

// Returns the value of an environment variable, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Precedence when several are present: Open MPI (mpirun also runs inside Slurm allocations, where SLURM_*
// describe the batch step), then torchrun-style (scripts export RANK/WORLD_SIZE under srun on purpose),
// then Slurm. Errors name the variable and the value found.
absl::StatusOr<LaunchEnv> parse_launch_env(const EnvLookup& lookup);

// An EnvLookup over this process's environment (getenv).
std::optional<std::string> process_env(std::string_view name);

// parse_launch_env over this process's environment.
absl::StatusOr<LaunchEnv> launch_env_from_process();

// What `nanoforge launch` (launch/agent.h) tells the ranks of a re-formed round (after a failure, or to take
// in a machine that joined), in NANOFORGE_LAUNCH_REFORMATION, so that rank 0 records it in metrics.jsonl and
// on the console.
struct LaunchReformation {
  std::string cause =
      "failure";    // "failure": a node failed or vanished; "join": the job stopped to take one in
  int restart = 0;  // failures re-formed so far: 1 after the first (a join adds none)
  int previous_world_size = 0;
  std::string left, stayed, joined;  // node ranks: "2", "0->0 1->1", "" (the machines that came back)
  int64_t failure_unix_ms = 0;       // when this machine's agent learnt that the previous round ended
};
constexpr const char* kLaunchReformationVariable = "NANOFORGE_LAUNCH_REFORMATION";
// "cause=failure;restart=1;previous_world_size=3;left=2;stayed=0->0
// 1->1;joined=;failure_unix_ms=1765070000000".
std::string encode_launch_reformation(const LaunchReformation& reformation);
// nullopt when the variable is unset (not a re-formed round); an error naming the variable when it is bad.
absl::StatusOr<std::optional<LaunchReformation>> launch_reformation_from_env(const EnvLookup& lookup);

}  // namespace nanoforge
