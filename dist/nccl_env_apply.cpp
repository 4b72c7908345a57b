// apply_advised_nccl_environment: probe, advise, review against the environment, export what is missing.
#include "dist/nccl_env_apply.h"

#include <cstdlib>
#include <cstring>

#include "dist/nccl_env_advice.h"
#include "dist/rdma_probe.h"

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

}  // namespace nanoforge
