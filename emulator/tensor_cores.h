// nvcuda::wmma on the emulator: 16x16x16 fragments of bf16 (matrix_a, matrix_b) and f32 (accumulator). CUDA
// leaves unspecified which lane holds which element of a fragment, so every launch draws a new random
// element-to-lane mapping per fragment kind: a kernel that depends on a mapping gives different results from
// launch to launch and schedule to schedule. Loads, stores and mma_sync are warp-synchronous calls that check
// what CUDA requires (all 32 lanes, the same pointer and stride in every lane, 32-byte aligned pointers,
// strides of whole 16 bytes). Fresh fragments hold NaNs, as uninitialised registers hold garbage. The
// inline-PTX mma.sync and ldmatrix (plain and .trans) of mma_ptx.cuh run here too, with the fragment layouts
// of the PTX ISA.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <limits>
#include <source_location>
#include <type_traits>

namespace nanoforge::emulator {

enum class FragmentKind : uint8_t {
  kMatrixARowMajor,
  kMatrixAColMajor,
  kMatrixBRowMajor,
  kMatrixBColMajor,
  kAccumulator
};
enum class ElementType : uint8_t { kBf16, kF32 };

// Warp-synchronous fragment operations. `elements` is the calling lane's x[] (8 elements).
void fragment_load(FragmentKind kind, ElementType type, void* elements, const void* pointer, unsigned ldm,
                   bool column_major, std::source_location site);
void fragment_store(const float* elements, float* pointer, unsigned ldm, bool column_major,
                    std::source_location site);
void fragment_mma(float* d, const __nv_bfloat16* a, FragmentKind a_kind, const __nv_bfloat16* b,
                  FragmentKind b_kind, const float* c, std::source_location site);

// The inline-PTX instructions of kernels/cuda/mma_ptx.cuh, with the PTX ISA's fragment layouts.
void ptx_mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                      std::source_location site = std::source_location::current());
void ptx_mma_m16n8k32_fp8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                          bool a_is_e5m2, std::source_location site = std::source_location::current());
void ptx_ldmatrix_x4(uint32_t (&r)[4], const void* row,
                     std::source_location site = std::source_location::current());
void ptx_ldmatrix_x4_trans(uint32_t (&r)[4], const void* row,
                           std::source_location site = std::source_location::current());

}  // namespace nanoforge::emulator

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace emulated {

template <class T>
T not_a_number() {
  if constexpr (std::is_same_v<T, float>) {
    return std::numeric_limits<float>::quiet_NaN();
  } else {
    return __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
  }
}

template <class T, nanoforge::emulator::FragmentKind kKind>
struct FragmentBase {
  using element_type = T;
  static constexpr int num_elements = 8;
  static constexpr nanoforge::emulator::FragmentKind kind = kKind;
  T x[num_elements];
  FragmentBase() {
    for (T& element : x)
      element = not_a_number<T>();
  }
};

}  // namespace emulated

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment;

using nanoforge::emulator::FragmentKind;
template <>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major>
    : public emulated::FragmentBase<__nv_bfloat16, FragmentKind::kMatrixARowMajor> {};
template <>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, col_major>
    : public emulated::FragmentBase<__nv_bfloat16, FragmentKind::kMatrixAColMajor> {};
template <>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, row_major>
    : public emulated::FragmentBase<__nv_bfloat16, FragmentKind::kMatrixBRowMajor> {};
template <>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, col_major>
    : public emulated::FragmentBase<__nv_bfloat16, FragmentKind::kMatrixBColMajor> {};
template <>
class fragment<accumulator, 16, 16, 16, float>
    : public emulated::FragmentBase<float, FragmentKind::kAccumulator> {};

template <class Fragment, class Value>
inline void fill_fragment(Fragment& fragment, const Value& value) {
  for (auto& element : fragment.x)
    element = static_cast<typename Fragment::element_type>(value);
}

template <class Use, class Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout>& a,
                             const __nv_bfloat16* pointer, unsigned ldm,
                             std::source_location site = std::source_location::current()) {
  nanoforge::emulator::fragment_load(a.kind, nanoforge::emulator::ElementType::kBf16, a.x, pointer, ldm,
                                     std::is_same_v<Layout, col_major>, site);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& c, const float* pointer, unsigned ldm,
                             layout_t layout, std::source_location site = std::source_location::current()) {
  nanoforge::emulator::fragment_load(c.kind, nanoforge::emulator::ElementType::kF32, c.x, pointer, ldm,
                                     layout == mem_col_major, site);
}

inline void store_matrix_sync(float* pointer, const fragment<accumulator, 16, 16, 16, float>& c, unsigned ldm,
                              layout_t layout, std::source_location site = std::source_location::current()) {
  nanoforge::emulator::fragment_store(c.x, pointer, ldm, layout == mem_col_major, site);
}

template <class LayoutA, class LayoutB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA>& a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c,
                     std::source_location site = std::source_location::current()) {
  nanoforge::emulator::fragment_mma(d.x, a.x, a.kind, b.x, b.kind, c.x, site);
}

}  // namespace nvcuda::wmma
