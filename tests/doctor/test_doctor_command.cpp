// `nanoforge doctor` end to end: on this machine (no RDMA device) it exits 0 and prints the socket fallback
// and its export lines, then CUDA, NCCL, MPI and CPU facts, and ends with a JSON line; on recorded machines
// it prints their NCCL settings; a user setting that will make NCCL fail makes it exit 1 and say why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "doctor_fixtures.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace nanoforge {
namespace {

struct DoctorRun {
  int exit_code;
  std::string output;  // stdout, then stderr
  std::string last_stdout_line;
};

// Runs doctor with the NCCL variables it reviews cleared, then `environment` (e.g. "NCCL_IB_HCA=x").
DoctorRun doctor(const std::string& arguments, const std::string& environment = "") {
  const std::string stderr_path = "/tmp/nanoforge_doctor_stderr_" + std::to_string(::getpid());
  const test::ProgramRun program = test::run_command(
      "env -u NCCL_IB_DISABLE -u NCCL_IB_HCA -u NCCL_IB_GID_INDEX -u NCCL_IB_ROCE_VERSION_NUM "
      "-u NCCL_SOCKET_IFNAME -u NCCL_NET " +
      environment + " " + test::nanoforge_binary() + " doctor " + arguments + " 2>" + stderr_path);
  DoctorRun run{program.exit_code, program.output, test::last_line(program.output)};
  if (FILE* errors = fopen(stderr_path.c_str(), "r")) {
    std::array<char, 4096> buffer;
    while (size_t n = fread(buffer.data(), 1, buffer.size(), errors))
      run.output.append(buffer.data(), n);
    fclose(errors);
  }
  std::filesystem::remove(stderr_path);
  return run;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DoctorCommand, ThisMachineWithoutRdmaExitsZeroAndPrintsTheFallback) {
  if (std::filesystem::exists("/sys/class/infiniband") && !std::filesystem::is_empty("/sys/class/infiniband"))
    GTEST_SKIP() << "this machine has RDMA devices";
  const DoctorRun run = doctor("");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "RDMA devices (libibverbs): 0")) << run.output;
  EXPECT_TRUE(contains(run.output, "NCCL transport: sockets (TCP)")) << run.output;
  EXPECT_TRUE(contains(run.output, "export NCCL_IB_DISABLE=1\n")) << run.output;
  EXPECT_TRUE(contains(run.output, "CUDA:")) << run.output;
  EXPECT_TRUE(contains(run.output, "MPI: ")) << run.output;
  EXPECT_TRUE(contains(run.output, "verdict: ready")) << run.output;
  EXPECT_EQ(run.last_stdout_line.rfind("{\"doctor\": {\"ok\": true", 0), 0u) << run.last_stdout_line;
  EXPECT_TRUE(contains(run.last_stdout_line, "\"transport\": \"socket\"")) << run.last_stdout_line;
  EXPECT_TRUE(contains(run.last_stdout_line, "\"NCCL_IB_DISABLE\": \"1\"")) << run.last_stdout_line;
}

TEST(DoctorCommand, RecordedSparkGetsBothDevicesExported) {
  const DoctorRun run = doctor("--inventory " + testing::recorded_path("spark_one_cable.txt"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "export NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0\n")) << run.output;
  EXPECT_TRUE(contains(run.output, "export NCCL_IB_GID_INDEX=3\n")) << run.output;
  EXPECT_TRUE(contains(run.output, "::ffff:192.168.100.10")) << run.output;
  EXPECT_TRUE(contains(run.output, "<- NCCL")) << run.output;
  EXPECT_TRUE(contains(run.last_stdout_line, "\"data_ports\": [\"rocep1s0f0:1\", \"roceP2p1s0f0:1\"]"))
      << run.last_stdout_line;
}

TEST(DoctorCommand, UserSettingsAreKeptAndNotExported) {
  const DoctorRun run =
      doctor("--inventory " + testing::recorded_path("spark_one_cable.txt"), "NCCL_IB_GID_INDEX=3");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(contains(run.output, "export NCCL_IB_GID_INDEX")) << run.output;
  EXPECT_TRUE(contains(run.output, "already set in your environment (kept):")) << run.output;
  EXPECT_TRUE(contains(run.last_stdout_line, "\"kept\": [\"NCCL_IB_GID_INDEX\"]")) << run.last_stdout_line;
}

TEST(DoctorCommand, ASettingThatBreaksNcclExitsOneAndSaysWhat) {
  const DoctorRun run = doctor("", "NCCL_SOCKET_IFNAME=nonexistent9");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(contains(run.output, "verdict: BROKEN")) << run.output;
  EXPECT_TRUE(contains(run.output, "NCCL_SOCKET_IFNAME=nonexistent9 matches no interface")) << run.output;
  EXPECT_TRUE(contains(run.output, "nanoforge doctor: error: training would fail")) << run.output;
  EXPECT_EQ(run.last_stdout_line.rfind("{\"doctor\": {\"ok\": false", 0), 0u) << run.last_stdout_line;
}

TEST(DoctorCommand, MisconfiguredMachineWarnsButExitsZero) {
  const DoctorRun run = doctor("--inventory " + testing::recorded_path("misconfigured.txt"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "warnings (4):")) << run.output;
  EXPECT_TRUE(contains(run.output, "verdict: ready, with 4 warnings above")) << run.output;
}

TEST(DoctorCommand, RecordedInventoryReadsBackTheSame) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nanoforge_doctor_inventory_" + std::to_string(::getpid()) + ".txt"))
                               .string();
  const DoctorRun recorded_run = doctor("--record-inventory " + path);
  EXPECT_TRUE(contains(recorded_run.output, "wrote this machine's RDMA inventory to " + path))
      << recorded_run.output;
  const DoctorRun replayed = doctor("--inventory " + path);
  std::filesystem::remove(path);
  EXPECT_EQ(replayed.exit_code, recorded_run.exit_code) << replayed.output;
  auto transport = [](const std::string& json) { return json.substr(json.find("\"transport\"")); };
  EXPECT_EQ(transport(replayed.last_stdout_line).substr(0, 40),
            transport(recorded_run.last_stdout_line).substr(0, 40));
}

TEST(DoctorCommand, MissingInventoryFileIsAnError) {
  const DoctorRun run = doctor("--inventory /nonexistent/machine.txt");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "cannot read the RDMA inventory '/nonexistent/machine.txt'"))
      << run.output;
}

}  // namespace
}  // namespace nanoforge
