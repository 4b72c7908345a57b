// add_verbs_devices for builds without libibverbs: no device can be listed, and the note says how to fix it.
#include "doctor/rdma_verbs.h"

namespace nanoforge {

void add_verbs_devices(RdmaInventory& inventory) {
  inventory.notes.push_back(
      "this nanoforge was built without libibverbs (rdma-core), so it cannot list RDMA devices: install "
      "libibverbs-dev (Debian/Ubuntu) or rdma-core-devel and rebuild");
}

}  // namespace nanoforge
