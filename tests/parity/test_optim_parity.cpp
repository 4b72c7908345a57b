// The training optimizer (one rank) against nanochat's own MuonAdamW steps: three chained steps of every
// golden pass the parity README's rule (parity/optim_parity_compare.h), and a broken hyperparameter would
// not.
#include <gtest/gtest.h>

#include "dist/single_communicator.h"
#include "parity/optim_parity.h"
#include "parity/optim_parity_compare.h"
#include "tests/parity/golden_file.h"
#include "tests/parity/golden_steps.h"

namespace nanoforge {
namespace {

TEST(OptimParity, RealInitGolden) {
  test::expect_golden_steps_pass("optim_real_init.h5", Device::kCpu);
}
TEST(OptimParity, PerturbedGolden) {
  test::expect_golden_steps_pass("optim_perturbed.h5", Device::kCpu);
}
TEST(OptimParity, Bf16OrthogonalisationGolden) {
  test::expect_golden_steps_pass("optim_bf16_ortho.h5", Device::kCpu);
}

TEST(OptimParity, AWrongMomentumIsCaught) {
  const std::string path = test::golden_path("optim_perturbed.h5");
  auto golden = read_optim_golden(path);
  SingleCommunicator communicator(Device::kCpu);
  ASSERT_TRUE(golden.ok());
  for (OptimGoldenStep& step : golden->steps)
    step.schedule.muon_momentum = 0.95;  // the schedule says 0.85
  auto after = run_optim_parity(*golden, communicator);
  ASSERT_TRUE(after.ok());
  auto checks = compare_optim_with_golden(*golden, *after);
  ASSERT_TRUE(checks.ok());
  int failures = 0;
  for (const TensorCheck& check : *checks)
    failures += !check.passed;
  EXPECT_GT(failures, 10);
}

}  // namespace
}  // namespace nanoforge
