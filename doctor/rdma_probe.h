// Fills an RdmaInventory from this machine: RDMA devices, ports and GIDs through rdma-core's libibverbs, GID
// types and network devices from sysfs (/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/{types,ndevs}),
// network interfaces from getifaddrs and /sys/class/net, the default route from /proc/net/route. Read-only;
// needs no privileges. A machine with no RDMA device (or no RDMA kernel support) gives an inventory with no
// devices, not an error.
#pragma once

#include <absl/status/statusor.h>

#include "doctor/rdma_inventory.h"

namespace nanoforge {

// When there is no device, inventory.notes says why (no kernel RDMA support, no uverbs device, ...).
absl::StatusOr<RdmaInventory> probe_rdma_inventory();

}  // namespace nanoforge
