// Packs of consecutive elements that a thread loads or stores in one instruction: 16 bytes (8 bf16, 4 f32)
// when the data allows it, so that a warp moves 512 contiguous bytes per access, which is what memory-bound
// kernels need to approach the GPU's bandwidth. Pack<T, 1> is the scalar fallback for unaligned views and
// widths that do not divide into packs; kernels are instantiated for both and the launcher picks one.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace nanoforge::cuda {

inline constexpr int kPackBytes = 16;

template <class T>
inline constexpr int kElementsPer16Bytes = kPackBytes / static_cast<int>(sizeof(T));

template <class T, int kCount>
struct alignas(sizeof(T) * kCount) Pack {
  T values[kCount];
};

// Pack `index` of the pack-aligned array `base`, by reference; the alignment makes these 128-bit accesses.
template <int kCount, class T>
__device__ inline const Pack<T, kCount>& pack_at(const T* base, int64_t index) {
  return reinterpret_cast<const Pack<T, kCount>*>(base)[index];
}
template <int kCount, class T>
__device__ inline Pack<T, kCount>& pack_at(T* base, int64_t index) {
  return reinterpret_cast<Pack<T, kCount>*>(base)[index];
}

// Whether 16-byte packs may be used on every one of `pointers`.
inline bool pack_aligned(std::initializer_list<const void*> pointers) {
  for (const void* pointer : pointers) {
    if (reinterpret_cast<uintptr_t>(pointer) % kPackBytes != 0) return false;
  }
  return true;
}

// Calls launch(std::integral_constant<int, kCount>{}) with kCount elements of T per pack: 16 bytes' worth
// when `packable` (the caller has checked alignment and divisibility), else 1.
template <class T, class Launch>
void with_pack_count(bool packable, Launch&& launch) {
  if (packable) {
    launch(std::integral_constant<int, kElementsPer16Bytes<T>>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

__device__ inline float to_float(float value) {
  return value;
}
__device__ inline float to_float(__nv_bfloat16 value) {
  return __bfloat162float(value);
}

// Rounds to nearest even, as torch does when it casts fp32 results to bf16.
template <class T>
__device__ inline T from_float(float value);
template <>
__device__ inline float from_float<float>(float value) {
  return value;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}

}  // namespace nanoforge::cuda
