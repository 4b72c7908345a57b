// Emulated device memory (runtime.h): each cudaMalloc is a host allocation of exactly the bytes asked for,
// 256-byte aligned as cudaMalloc's are, so AddressSanitizer reports the first byte past its end; new memory
// holds 0xFF bytes (NaN in f32 and bf16) rather than zeros, as a GPU's holds whatever was there. A registry
// of live allocations lets copies, launches and cuBLASLt check that a pointer is device memory of the right
// GPU.
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include "emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees

struct Registry {
  std::map<uintptr_t, Allocation> live;
  uint64_t next_serial = 1;
};

Registry& registry() {
  static Registry* instance = new Registry();
  return *instance;
}

}  // namespace

const Allocation* find_allocation(const void* pointer, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto& live = registry().live;
  auto after = live.upper_bound(address);
  if (after == live.begin()) return nullptr;
  const Allocation& a = std::prev(after)->second;
  const auto base = reinterpret_cast<uintptr_t>(a.base);
  if (address + bytes > base + a.bytes || address + bytes < address) return nullptr;
  return &a;
}

void* allocate(size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  void* pointer = nullptr;
  if (posix_memalign(&pointer, kAlignment, bytes) != 0) return nullptr;
  std::memset(pointer, 0xFF, bytes);
  Registry& r = registry();
  r.live[reinterpret_cast<uintptr_t>(pointer)] =
      Allocation{static_cast<char*>(pointer), bytes, device, r.next_serial++};
  return pointer;
}

bool release(void* pointer, int device) {
  auto& live = registry().live;
  const auto found = live.find(reinterpret_cast<uintptr_t>(pointer));
  if (found == live.end() || (found->second.device < 0) != (device < 0)) return false;
  live.erase(found);
  std::free(pointer);
  return true;
}

std::vector<const Allocation*> allocations_named_in(const void* bytes, size_t size, int device) {
  std::vector<const Allocation*> named;
  const auto* begin = static_cast<const unsigned char*>(bytes);
  for (size_t offset = 0; offset + sizeof(void*) <= size; offset += sizeof(void*)) {
    void* word = nullptr;
    std::memcpy(&word, begin + offset, sizeof(word));
    const Allocation* a = find_allocation(word);
    if (a == nullptr || a->device != device) continue;
    bool seen = false;
    for (const Allocation* other : named)
      seen = seen || other == a;
    if (!seen) named.push_back(a);
  }
  return named;
}

size_t allocated_bytes(int device) {
  size_t total = 0;
  for (const auto& [address, a] : registry().live) {
    if (a.device == device) total += a.bytes;
  }
  return total;
}

}  // namespace nanoforge::emulator
