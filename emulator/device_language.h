// The CUDA device language for a .cu file compiled as C++ by the host compiler: the emulation build
// force-includes this header into kernels/cuda/*.cu, as nvcc implicitly includes cuda_runtime.h. It gives the
// built-in variables, barriers, warp intrinsics, atomics, the integer and math intrinsics the kernels use and
// nvcuda::wmma, all running on the emulator (execution.h). A __shared__ variable becomes a function static:
// blocks run one at a time, so every thread of the running block sees the same object.
#pragma once

#if !defined(NANOFORGE_CUDA_EMULATION)
#error "device_language.h belongs to the emulation build of kernels/cuda (NANOFORGE_CUDA_EMULATION)"
#endif

// Before cuda_runtime.h, which defines the memory-space keywords only where they are not yet defined.
#define __shared__ static
#define __constant__ static const

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "emulator/execution.h"
#include "emulator/tensor_cores.h"

#define __launch_bounds__(...)

#define threadIdx (::nanoforge::emulator::thread_index())
#define blockIdx (::nanoforge::emulator::block_index())
#define blockDim (::nanoforge::emulator::block_dim())
#define gridDim (::nanoforge::emulator::grid_dim())
#define warpSize 32

// The runtime's C++ overloads that cuda_runtime.h declares only for nvcc.
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attribute, value);
}

// ---- barriers and warp-synchronous intrinsics ----

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  ::nanoforge::emulator::sync_block(site);
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  ::nanoforge::emulator::sync_warp(mask, site);
}

namespace nanoforge::emulator {
template <class T>
inline T shuffle_value(int kind, unsigned mask, T value, int arg, int width, const char* name,
                       std::source_location site) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "shuffles move 4- or 8-byte values");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle(kind, mask, bits, arg, width, name, site);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
}  // namespace nanoforge::emulator

template <class T>
inline T __shfl_sync(unsigned mask, T value, int source_lane, int width = warpSize,
                     std::source_location site = std::source_location::current()) {
  return ::nanoforge::emulator::shuffle_value(0, mask, value, source_lane, width, "__shfl_sync", site);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize,
                        std::source_location site = std::source_location::current()) {
  return ::nanoforge::emulator::shuffle_value(1, mask, value, static_cast<int>(delta), width,
                                              "__shfl_up_sync", site);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize,
                          std::source_location site = std::source_location::current()) {
  return ::nanoforge::emulator::shuffle_value(2, mask, value, static_cast<int>(delta), width,
                                              "__shfl_down_sync", site);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize,
                         std::source_location site = std::source_location::current()) {
  return ::nanoforge::emulator::shuffle_value(3, mask, value, lane_mask, width, "__shfl_xor_sync", site);
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return ::nanoforge::emulator::ballot(mask, predicate != 0, "__ballot_sync", site);
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return ::nanoforge::emulator::ballot(mask, predicate != 0, "__any_sync", site) != 0;
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return ::nanoforge::emulator::ballot(mask, predicate != 0, "__all_sync", site) == mask;
}

[[noreturn]] inline void __trap(std::source_location site = std::source_location::current()) {
  ::nanoforge::emulator::trap(site);
}

// One emulated thread runs at a time, so memory is always coherent and fences have nothing to order.
inline void __threadfence() {}
inline void __threadfence_block() {}

// ---- atomics: plain read-modify-writes, since one emulated thread runs at a time ----

template <class T>
inline T atomicAdd(T* address, T value) {
  if constexpr (std::is_floating_point_v<T>) ::nanoforge::emulator::note_float_atomic();
  const T old = *address;
  *address = old + value;
  return old;
}
template <class T>
inline T atomicMax(T* address, T value) {
  const T old = *address;
  *address = old < value ? value : old;
  return old;
}
template <class T>
inline T atomicMin(T* address, T value) {
  const T old = *address;
  *address = value < old ? value : old;
  return old;
}
template <class T>
inline T atomicExch(T* address, T value) {
  const T old = *address;
  *address = value;
  return old;
}
template <class T>
inline T atomicCAS(T* address, T compare, T value) {
  const T old = *address;
  if (old == compare) *address = value;
  return old;
}

// ---- integer and math intrinsics ----

inline int __popc(unsigned x) {
  return std::popcount(x);
}
inline int __popcll(unsigned long long x) {
  return std::popcount(x);
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
  return __builtin_ffsll(x);
}
inline int __clz(int x) {
  return std::countl_zero(static_cast<unsigned>(x));
}
inline unsigned __brev(unsigned x) {
  unsigned reversed = 0;
  for (int bit = 0; bit < 32; ++bit)
    reversed |= ((x >> bit) & 1u) << (31 - bit);
  return reversed;
}
inline int __float_as_int(float x) {
  return std::bit_cast<int>(x);
}
inline float __int_as_float(int x) {
  return std::bit_cast<float>(x);
}
inline unsigned __float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
inline float __uint_as_float(unsigned x) {
  return std::bit_cast<float>(x);
}
inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
  return 1.0 / sqrt(x);
}
inline float __expf(float x) {
  return expf(x);
}
inline float __logf(float x) {
  return logf(x);
}
inline float __fdividef(float x, float y) {
  return x / y;
}
inline float __saturatef(float x) {
  return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
}
template <class T>
inline T __ldg(const T* address) {
  return *address;
}

// CUDA's integer min and max overloads (device code calls them unqualified).
inline int max(int a, int b) {
  return a < b ? b : a;
}
inline int min(int a, int b) {
  return b < a ? b : a;
}
inline unsigned max(unsigned a, unsigned b) {
  return a < b ? b : a;
}
inline unsigned min(unsigned a, unsigned b) {
  return b < a ? b : a;
}
inline long long max(long long a, long long b) {
  return a < b ? b : a;
}
inline long long min(long long a, long long b) {
  return b < a ? b : a;
}
inline long max(long a, long b) {
  return a < b ? b : a;
}
inline long min(long a, long b) {
  return b < a ? b : a;
}
inline float max(float a, float b) {
  return fmaxf(a, b);
}
inline float min(float a, float b) {
  return fminf(a, b);
}
