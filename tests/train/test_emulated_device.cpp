// The CPU emulator of CUDA is for tests: train.device=auto never picks it (only an explicit train.device=cuda
// runs on it), and the program that links it, nanoforge-emulated (the command-line GPU tests' program), says
// so in --version, in doctor's verdict, in its start-up banner and in every step of metrics.jsonl; a run of
// one process prints no NCCL setting. Trees with the emulator only; the product program's side is
// tests/cli/check_product_program.py.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/cuda_memory.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"
#include "train/run_setup.h"

namespace nanoforge {
namespace {

using namespace test;

TEST(EmulatedDevice, AutoNeverPicksTheEmulator) {
  ASSERT_TRUE(cuda::emulated()) << "this test program links the emulated CUDA backend";
  ASSERT_TRUE(cuda::available()) << "the emulated GPU is usable, so auto could pick it";
  Recipe recipe;
  recipe.train.device = "auto";
  absl::StatusOr<Device> automatic = resolve_train_device(recipe);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(*automatic, Device::kCpu);
  recipe.train.device = "cuda";
  absl::StatusOr<Device> asked = resolve_train_device(recipe);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(*asked, Device::kCuda);
}

TEST(EmulatedProgram, VersionAndDoctorNameTheEmulator) {
  const ProgramRun version = run_command(std::string(gpu_nanoforge_binary()) + " --version 2>&1");
  ASSERT_EQ(version.exit_code, 0) << version.output;
  EXPECT_NE(version.output.find("THE CPU EMULATOR OF CUDA"), std::string::npos) << version.output;
  EXPECT_EQ(version.output.find("GPU build for sm"), std::string::npos) << version.output;

  const ProgramRun doctor = run_command(std::string(gpu_nanoforge_binary()) + " doctor 2>&1");
  EXPECT_NE(doctor.output.find("(for tests only: the GPUs are the CPU emulator of CUDA)"), std::string::npos)
      << doctor.output;
  EXPECT_NE(doctor.output.find("\"cuda_emulated\": true"), std::string::npos) << doctor.output;
}

// Two steps of the one-layer model through nanoforge-emulated with train.device = `device`; the console
// output, and the lines of metrics.jsonl that record a step.
struct EmulatedRun {
  ProgramRun program;
  std::vector<std::string> step_records;
};
EmulatedRun train_two_steps(const std::string& device) {
  const std::string dir = temp_dir("emulated_" + device);
  Recipe recipe = small_recipe();
  recipe.train.device = device;
  recipe.train.horizon.num_iterations = 2;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = -1;
  // One emulator schedule per launch: what is checked here is which device runs, not the kernels.
  EmulatedRun run{
      run_command(fmt::format("NANOFORGE_EMULATOR=schedules=rotate {} train --recipe {} --run-dir {} 2>&1",
                              gpu_nanoforge_binary(), recipe_file(recipe, dir), dir + "/run")),
      {}};
  for (const std::string& line : read_lines(dir + "/run/metrics.jsonl")) {
    if (line.find("\"loss\": ") != std::string::npos) run.step_records.push_back(line);
  }
  return run;
}

TEST(EmulatedProgram, TrainsOnTheEmulatorOnlyWhenAskedForCudaAndSaysSo) {
  const EmulatedRun automatic = train_two_steps("auto");
  ASSERT_EQ(automatic.program.exit_code, 0) << automatic.program.output;
  EXPECT_NE(automatic.program.output.find("memory allocated by this rank: "), std::string::npos);
  EXPECT_NE(automatic.program.output.find(" on cpu ("), std::string::npos) << automatic.program.output;
  EXPECT_EQ(automatic.program.output.find("emulator"), std::string::npos) << automatic.program.output;
  ASSERT_EQ(automatic.step_records.size(), 2u);
  for (const std::string& record : automatic.step_records)
    EXPECT_EQ(record.find("emulated_gpu"), std::string::npos) << record;

  const EmulatedRun asked = train_two_steps("cuda");
  ASSERT_EQ(asked.program.exit_code, 0) << asked.program.output;
  EXPECT_NE(asked.program.output.find("WARNING: training on NVIDIA H200 (nanoforge CUDA emulator): the CPU "
                                      "emulator of CUDA in nanoforge-emulated"),
            std::string::npos)
      << asked.program.output;
  // One process creates no NCCL communicator: no NCCL setting is applied or printed (issue 40's probe).
  EXPECT_EQ(asked.program.output.find("NCCL"), std::string::npos) << asked.program.output;
  ASSERT_EQ(asked.step_records.size(), 2u);
  for (const std::string& record : asked.step_records) {
    EXPECT_NE(record.find("\"emulated_gpu\": \"NVIDIA H200 (nanoforge CUDA emulator)\""), std::string::npos)
        << record;
  }
}

}  // namespace
}  // namespace nanoforge
