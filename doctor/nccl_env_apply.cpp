// apply_advised_nccl_environment: probe, advise, review against the environment, export what is missing.
#include "doctor/nccl_env_apply.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>

#include "dist/launch_env.h"
#include "doctor/nccl_env_advice.h"
#include "doctor/rdma_probe.h"

namespace nanoforge {

std::map<std::string, std::string> process_nccl_environment() {
  std::map<std::string, std::string> environment;
  for (const std::string& name : reviewed_nccl_variables())
    if (const char* value = std::getenv(name.c_str())) environment[name] = value;
  return environment;
}

std::vector<std::string> apply_advised_nccl_environment() {
  std::vector<std::string> applied;
  if (const char* opt_out = std::getenv("NANOFORGE_NCCL_AUTO");
      opt_out != nullptr && std::strcmp(opt_out, "0") == 0)
    return applied;
  const absl::StatusOr<RdmaInventory> inventory = probe_rdma_inventory();
  if (!inventory.ok()) return applied;
  const NcclAdvice advice = advise_nccl(*inventory);
  const EnvReview review = review_nccl_environment(*inventory, advice, process_nccl_environment());
  for (const EnvDecision& decision : review.decisions) {
    if (!decision.exported()) continue;
    // overwrite = 0: a value set meanwhile (another thread, the launcher) still wins.
    if (setenv(decision.name.c_str(), decision.advised.c_str(), 0) == 0)
      applied.push_back(decision.name + "=" + decision.advised);
  }
  return applied;
}

void apply_advised_nccl_environment_for_run() {
  const std::vector<std::string> applied = apply_advised_nccl_environment();
  const absl::StatusOr<LaunchEnv> launch = launch_env_from_process();
  if (applied.empty() || (launch.ok() && launch->rank != 0)) return;
  fmt::print(stderr,
             "nanoforge: NCCL settings from this machine's RDMA devices (see `nanoforge doctor`; set them "
             "yourself to override, NANOFORGE_NCCL_AUTO=0 to skip): {}\n",
             fmt::join(applied, " "));
}

}  // namespace nanoforge
