// parse_launch_env against recorded environments of mpirun, srun, torchrun and a plain start, and the
// errors a broken launch script produces.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dist/launch_env.h"

namespace nanoforge {
namespace {

using Environment = std::map<std::string, std::string>;

absl::StatusOr<LaunchEnv> parse(const Environment& environment) {
  return parse_launch_env([&](std::string_view name) -> std::optional<std::string> {
    auto it = environment.find(std::string(name));
    if (it == environment.end()) return std::nullopt;
    return it->second;
  });
}

TEST(LaunchEnv, NoLauncherIsOneProcess) {
  absl::StatusOr<LaunchEnv> env = parse({{"HOME", "/root"}, {"PATH", "/usr/bin"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, Launcher::kNone);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_FALSE(env->launched_by_mpi());
}

// Recorded from `mpirun -np 4 env` (Open MPI 4.1.4) on one machine, rank 2.
TEST(LaunchEnv, OpenMpi) {
  absl::StatusOr<LaunchEnv> env = parse({{"OMPI_COMM_WORLD_RANK", "2"},
                                         {"OMPI_COMM_WORLD_SIZE", "4"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                         {"OMPI_COMM_WORLD_NODE_RANK", "2"},
                                         {"OMPI_UNIVERSE_SIZE", "2"},
                                         {"PMIX_RANK", "2"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, Launcher::kOpenMpi);
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_TRUE(env->launched_by_mpi());
  EXPECT_EQ(env->describe(), "rank 2 of 4 (local rank 2), launched by mpirun");
}

// mpirun inside a Slurm allocation: the SLURM_* variables describe the batch step, Open MPI's the job.
TEST(LaunchEnv, OpenMpiWinsInsideSlurmAllocation) {
  absl::StatusOr<LaunchEnv> env = parse({{"SLURM_PROCID", "0"},
                                         {"SLURM_NTASKS", "16"},
                                         {"SLURM_LOCALID", "0"},
                                         {"OMPI_COMM_WORLD_RANK", "9"},
                                         {"OMPI_COMM_WORLD_SIZE", "16"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, Launcher::kOpenMpi);
  EXPECT_EQ(env->rank, 9);
  EXPECT_EQ(env->local_rank, 1);
}

// Recorded from `srun -N 2 --ntasks-per-node 8 env`, task 11 (the fourth on the second node).
TEST(LaunchEnv, Slurm) {
  absl::StatusOr<LaunchEnv> env = parse({{"SLURM_PROCID", "11"},
                                         {"SLURM_NTASKS", "16"},
                                         {"SLURM_NPROCS", "16"},
                                         {"SLURM_LOCALID", "3"},
                                         {"SLURM_NODEID", "1"},
                                         {"SLURM_STEP_ID", "0"},
                                         {"SLURM_JOB_ID", "4242"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, Launcher::kSlurm);
  EXPECT_EQ(env->rank, 11);
  EXPECT_EQ(env->world_size, 16);
  EXPECT_EQ(env->local_rank, 3);
  EXPECT_TRUE(env->launched_by_mpi());
}

TEST(LaunchEnv, SlurmOlderNprocsName) {
  absl::StatusOr<LaunchEnv> env = parse({{"SLURM_PROCID", "1"}, {"SLURM_NPROCS", "2"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->world_size, 2);
  EXPECT_EQ(env->local_rank, 0);
}

// Recorded from `torchrun --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 10.0.0.1:29500 ...`, global rank 3.
TEST(LaunchEnv, Torchrun) {
  absl::StatusOr<LaunchEnv> env = parse({{"RANK", "3"},
                                         {"WORLD_SIZE", "4"},
                                         {"LOCAL_RANK", "1"},
                                         {"LOCAL_WORLD_SIZE", "2"},
                                         {"GROUP_RANK", "1"},
                                         {"MASTER_ADDR", "10.0.0.1"},
                                         {"MASTER_PORT", "29500"},
                                         {"TORCHELASTIC_RUN_ID", "none"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, Launcher::kTorchrun);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "10.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_FALSE(env->launched_by_mpi());
}

// A launch script exporting RANK/WORLD_SIZE from Slurm's variables asks for the TCP rendezvous on purpose.
TEST(LaunchEnv, TorchrunStyleWinsOverSlurm) {
  absl::StatusOr<LaunchEnv> env = parse({{"SLURM_PROCID", "1"},
                                         {"SLURM_NTASKS", "2"},
                                         {"RANK", "1"},
                                         {"WORLD_SIZE", "2"},
                                         {"MASTER_ADDR", "spark-1"},
                                         {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, Launcher::kTorchrun);
  EXPECT_EQ(env->master_addr, "spark-1");
}

TEST(LaunchEnv, TorchrunWorldOfOneNeedsNoMaster) {
  absl::StatusOr<LaunchEnv> env = parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->world_size, 1);
}

void expect_error(const Environment& environment, const std::string& fragment) {
  absl::StatusOr<LaunchEnv> env = parse(environment);
  ASSERT_FALSE(env.ok()) << "parsed as " << env->describe();
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(env.status().message().find(fragment), std::string::npos) << env.status();
}

TEST(LaunchEnv, ErrorsNameTheVariable) {
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}}, "MASTER_ADDR");
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "99999"}},
               "MASTER_PORT=\"99999\"");
  expect_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK=\"4\" is not a whole number in [0, 3]");
  expect_error({{"RANK", "1"}}, "WORLD_SIZE is not set");
  expect_error({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, "OMPI_COMM_WORLD_RANK=\"x\"");
  expect_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}}, "OMPI_COMM_WORLD_SIZE");
  expect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "-1"}}, "SLURM_LOCALID");
}

// What nanoforge launch tells a re-formed round's ranks reads back as written; absent is not an error, a
// value another build wrote is, naming the variable.
TEST(LaunchEnv, ReformationNoteReadsBackAsWritten) {
  const LaunchReformation written{.cause = "join",
                                  .restart = 2,
                                  .previous_world_size = 3,
                                  .left = "1",
                                  .stayed = "0->0 2->1",
                                  .joined = "",
                                  .failure_unix_ms = 1765070000123};
  Environment environment = {{kLaunchReformationVariable, encode_launch_reformation(written)}};
  auto lookup = [&](std::string_view name) -> std::optional<std::string> {
    auto it = environment.find(std::string(name));
    if (it == environment.end()) return std::nullopt;
    return it->second;
  };
  absl::StatusOr<std::optional<LaunchReformation>> read = launch_reformation_from_env(lookup);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->cause, "join");
  EXPECT_EQ((*read)->restart, 2);
  EXPECT_EQ((*read)->previous_world_size, 3);
  EXPECT_EQ((*read)->left, "1");
  EXPECT_EQ((*read)->stayed, "0->0 2->1");
  EXPECT_EQ((*read)->joined, "");
  EXPECT_EQ((*read)->failure_unix_ms, 1765070000123);
  environment.clear();
  read = launch_reformation_from_env(lookup);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->has_value());
  environment = {{kLaunchReformationVariable, "restart=x"}};
  read = launch_reformation_from_env(lookup);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("NANOFORGE_LAUNCH_REFORMATION=\"restart=x\" is not what nanoforge "
                                         "launch writes"),
            std::string::npos)
      << read.status();
}

}  // namespace
}  // namespace nanoforge
