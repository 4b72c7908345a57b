// Packs of consecutive elements that a thread loads or stores in one instruction: 16 bytes (8 bf16, 4 f32)
// when the data allows it, so that a warp moves 512 contiguous bytes per access, which is what memory-bound
// kernels need to approach the GPU's bandwidth. Pack<T, 1> is the scalar fallback for unaligned views and
// widths that do not divide into packs; kernels are instantiated for both and the launcher picks one (the
// alignment checks and with_pack_count below). for_each_pack is the grid-stride loop of the flat elementwise
// kernels: whole packs, then the trailing elements one at a time, through the same body.
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

// Loads (or stores) kCount consecutive floats from pack `index` of a 16-byte aligned array: 16-byte packs of
// 4 when kCount is a multiple of 4, one at a time when kCount is 1. For fp32 data read beside kCount-element
// packs of a narrower type (bf16 rows and their fp32 tables).
template <int kCount>
__device__ inline void load_floats(const float* base, int64_t index, float (&values)[kCount]) {
  constexpr int kWidth = kCount % 4 == 0 ? 4 : 1;
#pragma unroll
  for (int q = 0; q < kCount / kWidth; ++q) {
    const Pack<float, kWidth> pack = pack_at<kWidth>(base, index * (kCount / kWidth) + q);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      values[q * kWidth + k] = pack.values[k];
  }
}

template <int kCount>
__device__ inline void store_floats(float* base, int64_t index, const float (&values)[kCount]) {
  constexpr int kWidth = kCount % 4 == 0 ? 4 : 1;
#pragma unroll
  for (int q = 0; q < kCount / kWidth; ++q) {
    Pack<float, kWidth> pack;
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      pack.values[k] = values[q * kWidth + k];
    pack_at<kWidth>(base, index * (kCount / kWidth) + q) = pack;
  }
}

// The grid-stride loop over a flat (numel) array in packs of kCount: body(i, width) for every whole pack i,
// with width a std::integral_constant<int, kCount>, then body(i, width) for each of the numel % kCount
// trailing elements i, with width a std::integral_constant<int, 1>; thread t of the grid takes items t,
// t + (grid threads), ... of each. body reads and writes pack_at<decltype(width)::value>(array, i) of each of
// its arrays, so one body serves both the packs and the tail.
template <int kCount, class Body>
__device__ inline void for_each_pack(int64_t numel, Body&& body) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = numel / kCount;
  for (int64_t i = first; i < packs; i += stride)
    body(i, std::integral_constant<int, kCount>{});
  for (int64_t i = packs * kCount + first; i < numel; i += stride)
    body(i, std::integral_constant<int, 1>{});
}

// Whether `pointer` is a multiple of `bytes` (a power of two): the alignment a pack of that size needs.
inline bool aligned_to(const void* pointer, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(pointer) % static_cast<uintptr_t>(bytes) == 0;
}

// Whether 16-byte packs may be used on every one of `pointers`.
inline bool pack_aligned(std::initializer_list<const void*> pointers) {
  for (const void* pointer : pointers) {
    if (!aligned_to(pointer, kPackBytes)) return false;
  }
  return true;
}

// Whether 16-byte packs of T may be used on rows of `width` elements starting at each of `pointers`: every
// row starts on a 16-byte boundary when the bases do and the width is whole packs.
template <class T>
bool rows_packable(int64_t width, std::initializer_list<const void*> pointers) {
  return width % kElementsPer16Bytes<T> == 0 && pack_aligned(pointers);
}

// Calls launch(std::integral_constant<int, kCount>{}) when `packable` (the caller has checked alignment and
// divisibility for packs of kCount), else launch(std::integral_constant<int, 1>{}).
template <int kCount, class Launch>
void with_pack_of(bool packable, Launch&& launch) {
  if (packable) {
    launch(std::integral_constant<int, kCount>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

// with_pack_of for 16 bytes' worth of T per pack.
template <class T, class Launch>
void with_pack_count(bool packable, Launch&& launch) {
  with_pack_of<kElementsPer16Bytes<T>>(packable, launch);
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
