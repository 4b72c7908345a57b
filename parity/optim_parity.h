// The optimizer's parity check against nanochat: replay a golden file's gradients (nanochat's own MuonAdamW
// steps, recorded in PyTorch) through the optimizer training uses (optim/data_parallel_optimizer.h, on any
// number of ranks: each feeds the golden's gradients, so their average is the golden's) with the file's
// hyperparameters and schedule values, step k starting from nanoforge's own step k-1, and write
// /steps/<k>/weights_after/<name>.
// Layout of both files: docs/parity.md.
#pragma once

#include <absl/status/statusor.h>

#include <map>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/gpt_config.h"
#include "optim/param_groups.h"
#include "optim/schedules.h"
#include "support/host_array.h"

namespace nanoforge {

struct OptimGoldenGroup {
  std::string kind;  // "adamw" or "muon"
  std::vector<std::string> params;
  double initial_lr = 0, weight_decay = 0;
  double beta1 = 0, beta2 = 0, eps = 0;  // AdamW
  double muon_beta2 = 0;                 // Muon
  int64_t ns_steps = 0;
};

struct OptimGoldenStep {
  int64_t iteration = 0;
  ScheduleValues schedule;
  std::map<std::string, HostArray<float>> grads;
};

struct OptimGolden {
  std::string path;
  GPTConfig config;
  std::vector<OptimGoldenGroup> groups;  // nanochat's group order
  // The precision nanochat orthogonalised in ("float32", or "bfloat16" as on a GPU): a bf16 golden is
  // compared by Frobenius norms, since fp32 cannot reproduce bf16's rounding element by element.
  std::string ortho_dtype = "float32";
  std::map<std::string, HostArray<float>> weights_before;
  std::vector<OptimGoldenStep> steps;
};

absl::StatusOr<OptimGolden> read_optim_golden(const std::string& path);

// nanoforge's groups for the golden's model, with the golden's hyperparameters; an error when the two
// disagree on which parameters form which group.
absl::StatusOr<std::vector<ParamGroup>> golden_param_groups(const OptimGolden& golden,
                                                            const ParamLayout& layout);

// weights_after of every step, by parameter name (the same on every rank). On Device::kCuda the optimizer
// runs as training runs it there (fp32 state, Muon orthogonalising in bf16); the communicator must be on
// `device`.
absl::StatusOr<std::vector<std::map<std::string, HostArray<float>>>> run_optim_parity(
    const OptimGolden& golden, Communicator& communicator, Device device = Device::kCpu);

absl::Status write_optim_result(const std::string& path,
                                const std::vector<std::map<std::string, HostArray<float>>>& weights_after);

}  // namespace nanoforge
