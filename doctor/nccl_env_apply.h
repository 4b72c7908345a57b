// Applying `nanoforge doctor`'s NCCL settings to a run: before NCCL initialises, each setting the doctor
// would advise on this machine (NCCL_IB_HCA with both halves of a Spark port, NCCL_IB_GID_INDEX,
// NCCL_SOCKET_IFNAME, ...) is exported into the process unless the user already set that variable. NCCL
// reads its environment when the communicator is created, so a run calls this before it creates one.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace nanoforge {

// The NCCL variables doctor reviews, as this process's environment has them.
std::map<std::string, std::string> process_nccl_environment();

// Probes this machine's RDMA devices and sets the advised NCCL variables the environment lacks. Returns
// "NAME=value" for each variable it set (empty when the user set them all or nothing is advised). The
// environment variable NANOFORGE_NCCL_AUTO=0 turns it off. A machine whose RDMA devices cannot be probed
// gets nothing set: NCCL then chooses on its own, as without nanoforge.
std::vector<std::string> apply_advised_nccl_environment();

// apply_advised_nccl_environment for a run about to create its NCCL communicator; the job's rank 0 says on
// standard error which settings it set and how to override them.
void apply_advised_nccl_environment_for_run();

}  // namespace nanoforge
