// The CUDA entry points of a build without the CUDA backend (NANOFORGE_CUDA=OFF or no nvcc): reporting
// "unavailable" with the reason, and refusing device memory with the way to get a CUDA build.
#include <fmt/format.h>

#include "kernels/cuda/cuda_memory.h"
#include "support/check.h"

namespace nanoforge::cuda {
namespace {
constexpr const char* kNotBuilt =
    "this nanoforge was built without the CUDA backend; reconfigure with -DNANOFORGE_CUDA=ON and nvcc on "
    "PATH";
}

bool available(std::string* reason) {
  if (reason != nullptr) *reason = kNotBuilt;
  return false;
}

int device_count() {
  return 0;
}
bool emulated() {
  return false;
}
void* allocate_zeroed(int64_t) {
  NANOFORGE_CHECK(false, "{}", kNotBuilt);
}
void free(void*) {
  NANOFORGE_CHECK(false, "{}", kNotBuilt);
}
void copy_from_host(void*, const void*, int64_t) {
  NANOFORGE_CHECK(false, "{}", kNotBuilt);
}
void copy_to_host(void*, const void*, int64_t) {
  NANOFORGE_CHECK(false, "{}", kNotBuilt);
}
void synchronize() {}
bool device_memory_info(GpuMemoryInfo*, std::string* reason) {
  return available(reason);
}
bool device_compute_capability(int*, int*, std::string* reason) {
  return available(reason);
}

}  // namespace nanoforge::cuda
