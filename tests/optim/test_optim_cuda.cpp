// The training optimizer on the GPU (fp32 parameters, gradients and state; Muon orthogonalising in bf16)
// against nanochat's own MuonAdamW steps: three chained steps of the golden whose orthogonalisation ran in
// bf16 on a GPU, by the parity README's rule for it — AdamW tensors element by element (1e-3 of the step's
// change: both sides are fp32 and differ only in rounding order), Muon tensors by Frobenius norms
// (||got - expected|| <= 0.5 ||expected - before||: bf16 Polar Express cancels heavily, 6-24 % relative error
// was measured against float64, and two bf16 implementations round differently). And the same rule against
// the fp32 golden of the perturbed model, where every gradient is non-zero: a bf16 orthogonalisation must
// land as close to fp32 Muon as nanochat's own bf16 run does.
#include <gtest/gtest.h>

#include <string>

#include "dist/single_communicator.h"
#include "kernels/cuda/cuda_memory.h"
#include "tests/optim/golden_file.h"
#include "train/optim_parity.h"
#include "train/optim_parity_compare.h"

namespace nanoforge {
namespace {

void expect_cuda_steps_match(const std::string& name) {
  std::string reason;
  if (!cuda::available(&reason)) GTEST_SKIP() << "no usable GPU: " << reason;
  const std::string path = test::golden_path(name);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto golden = read_optim_golden(path);
  ASSERT_TRUE(golden.ok()) << golden.status();
  golden->ortho_dtype = "bfloat16";  // compare Muon tensors by the bf16 rule whatever the golden ran in
  SingleCommunicator communicator(Device::kCuda);
  auto after = run_optim_parity(*golden, communicator, Device::kCuda);
  ASSERT_TRUE(after.ok()) << after.status();
  auto checks = compare_optim_with_golden(*golden, *after);
  ASSERT_TRUE(checks.ok()) << checks.status();
  EXPECT_EQ(checks->size(), 3u * 21u);
  for (const TensorCheck& check : *checks) {
    EXPECT_TRUE(check.passed) << check.name << ": " << check.max_error << " > " << check.tolerance << " "
                              << check.problem;
  }
}

TEST(OptimCuda, Bf16OrthogonalisationGolden) {
  expect_cuda_steps_match("optim_dev_bf16ortho.h5");
}

TEST(OptimCuda, PerturbedFp32GoldenWithinTheBf16Rule) {
  expect_cuda_steps_match("optim_dev_perturbed.h5");
}

}  // namespace
}  // namespace nanoforge
