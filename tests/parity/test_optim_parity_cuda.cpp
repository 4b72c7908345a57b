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

#include "parity/optim_parity.h"
#include "tests/kernels/cuda/gpu_test_support.h"
#include "tests/parity/golden_steps.h"

namespace nanoforge {
namespace {

void expect_cuda_steps_match(const std::string& name) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  // Compare Muon tensors by the bf16 rule whatever the golden ran in.
  test::expect_golden_steps_pass(name, Device::kCuda,
                                 [](OptimGolden& golden) { golden.ortho_dtype = "bfloat16"; });
}

TEST(OptimCuda, Bf16OrthogonalisationGolden) {
  expect_cuda_steps_match("optim_bf16_ortho.h5");
}

TEST(OptimCuda, PerturbedFp32GoldenWithinTheBf16Rule) {
  expect_cuda_steps_match("optim_perturbed.h5");
}

}  // namespace
}  // namespace nanoforge
