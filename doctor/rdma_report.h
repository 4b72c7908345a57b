// The text `nanoforge doctor` prints about networking, as pure functions of the inventory, the advice and the
// review of the user's environment, so that tests can read exactly what a user would on a recorded machine.
#pragma once

#include <string>

#include "doctor/nccl_env_advice.h"
#include "doctor/rdma_inventory.h"

namespace nanoforge {

// Devices, ports (state, link layer, rate, MTU, netdev), GID tables with the chosen GID marked, the transport
// NCCL will use and what bandwidth to expect, then warnings and notes.
std::string format_rdma_report(const RdmaInventory& inventory, const NcclAdvice& advice);

// The advised settings with their reasons, the ones kept from the environment, the user-setting warnings and
// problems, and one `export NAME=value` line per setting to apply.
std::string format_nccl_settings(const NcclAdvice& advice, const EnvReview& review);

// "ConnectX-7" for vendor part 4129, "" when unknown.
std::string adapter_name(int vendor_part_id);

// A GID for people: "::ffff:192.168.100.10", "fe80::3e6d:66ff:fecc:b3b6" (the sysfs text when it does not
// parse).
std::string readable_gid(const std::string& sysfs_gid);

// `value` quoted for a POSIX shell when it needs to be.
std::string shell_quoted(const std::string& value);

}  // namespace nanoforge
