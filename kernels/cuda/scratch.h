// Device scratch for the CUDA kernels whose op contract has no workspace (two-pass deterministic
// reductions: per-block partials, then one block sums them in order; values read back to the host). One
// grow-only buffer per process: it reaches its size during the first step and is never reallocated after,
// so steps do not allocate. Kernels run in order on one stream, so consecutive ops may reuse it; an op must
// not hold on to it after it returns.
#pragma once

#include <cstdint>

namespace nanoforge::cuda {

// At least `bytes` of device memory, 256-byte aligned, contents undefined. Growing it waits for the device
// (the old buffer may be in use by queued kernels).
void* device_scratch(int64_t bytes);

// At least `bytes` of pinned host memory for reading small results back (same lifetime rules).
void* host_scratch(int64_t bytes);

}  // namespace nanoforge::cuda
