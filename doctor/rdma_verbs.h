// The RDMA devices of this machine as libibverbs (rdma-core) lists them. A build without libibverbs still
// has the doctor: its inventory then lists no device and a note says how to get them.
#pragma once

#include "doctor/rdma_inventory.h"

namespace nanoforge {

// Appends every device (ports, GIDs, link state) to inventory.devices; a note in inventory.notes for each
// device that could not be read, or for why there is none.
void add_verbs_devices(RdmaInventory& inventory);

}  // namespace nanoforge
