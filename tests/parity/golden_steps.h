// The optimizer parity check the CPU and GPU tests share: run three chained steps of a nanochat golden on one
// rank and check every tensor by the parity README's rule (parity/optim_parity_compare.h).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "dist/single_communicator.h"
#include "parity/optim_parity.h"
#include "parity/optim_parity_compare.h"
#include "tests/parity/golden_file.h"

namespace nanoforge::test {

// Runs golden `name` (after adjust(golden), if given) on `device` and expects all 3 x 21 tensor checks to
// pass.
inline void expect_golden_steps_pass(const std::string& name, Device device,
                                     const std::function<void(OptimGolden&)>& adjust = {}) {
  const std::string path = golden_path(name);
  auto golden = read_optim_golden(path);
  ASSERT_TRUE(golden.ok()) << golden.status();
  if (adjust) adjust(*golden);
  SingleCommunicator communicator(device);
  auto after = run_optim_parity(*golden, communicator, device);
  ASSERT_TRUE(after.ok()) << after.status();
  auto checks = compare_optim_with_golden(*golden, *after);
  ASSERT_TRUE(checks.ok()) << checks.status();
  EXPECT_EQ(checks->size(), 3u * 21u);
  for (const TensorCheck& check : *checks) {
    EXPECT_TRUE(check.passed) << check.name << ": " << check.max_error << " > " << check.tolerance << " "
                              << check.problem;
  }
}

}  // namespace nanoforge::test
