// cp.async on the emulator (async_copy.h): each thread's queue lives with the thread (execution.h), so a
// copy lands, source read and destination written, only at the wait_group that releases its group.
#include "emulator/async_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "emulator/execution.h"

namespace nanoforge::emulator {
namespace {

constexpr uint32_t kCopyBytes = 16;

void land(const PendingAsyncCopy& copy) {
  std::memcpy(copy.destination, copy.source, copy.source_bytes);
  std::memset(static_cast<unsigned char*>(copy.destination) + copy.source_bytes, 0,
              copy.bytes - copy.source_bytes);
}

}  // namespace

void ptx_cp_async_16(void* destination, const void* source, uint32_t source_bytes,
                     std::source_location site) {
  if (reinterpret_cast<uintptr_t>(destination) % kCopyBytes != 0 ||
      reinterpret_cast<uintptr_t>(source) % kCopyBytes != 0) {
    device_error(fmt::format("cp.async (16 bytes): destination {} and source {} must both be 16-byte aligned",
                             destination, source),
                 site);
  }
  if (!in_dynamic_shared_memory(destination, kCopyBytes)) {
    device_error(
        fmt::format("cp.async: destination {} is not inside the block's dynamic shared memory", destination),
        site);
  }
  if (source_bytes != 0 && source_bytes != kCopyBytes) {
    device_error(fmt::format("cp.async (16 bytes): source size {} must be 0 or 16 here", source_bytes), site);
  }
  running_thread_async_copies().uncommitted.push_back({destination, source, kCopyBytes, source_bytes});
}

void ptx_cp_async_commit_group() {
  AsyncCopies& copies = running_thread_async_copies();
  copies.groups.push_back(std::move(copies.uncommitted));
  copies.uncommitted.clear();
}

void ptx_cp_async_wait_group(int pending) {
  AsyncCopies& copies = running_thread_async_copies();
  const auto keep = static_cast<size_t>(std::max(pending, 0));
  if (copies.groups.size() <= keep) return;
  const auto released = copies.groups.size() - keep;
  for (size_t g = 0; g < released; ++g) {
    for (const PendingAsyncCopy& copy : copies.groups[g])
      land(copy);
  }
  copies.groups.erase(copies.groups.begin(), copies.groups.begin() + static_cast<std::ptrdiff_t>(released));
}

}  // namespace nanoforge::emulator
