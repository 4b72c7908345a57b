// Tensor-core instructions below wmma, for kernels that need to know which lane holds which element: the
// inline-PTX mma.sync m16n8k16 (bf16 in, f32 accumulators) and m16n8k32 (FP8 in), ldmatrix x4 (plain and
// .trans) and the asynchronous global-to-shared copies (cp.async) that feed them. Kernels use these functions
// rather than writing the asm themselves, so that the emulation build (emulator/) runs them with the fragment
// layouts and completion rules of NVIDIA's PTX ISA; with g = lane / 4 and t = lane % 4, a lane holds
//   A (16x16): a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..), a[3] = (g+8, 2t+8..)
//   B (16x8):  b[0] = (2t..2t+1, g), b[1] = (2t+8..2t+9, g)           (two bf16 per register, low half first)
//   C, D (16x8 f32): c[0], c[1] = (g, 2t), (g, 2t+1); c[2], c[3] = (g+8, 2t), (g+8, 2t+1)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(NANOFORGE_CUDA_EMULATION)
#include "emulator/async_copy.h"
#include "emulator/tensor_cores.h"
#endif

namespace nanoforge::cuda::ptx {

// d = a b + c for one warp: A (16x16) and B (16x8) bf16, C and D (16x8) f32
// (mma.sync.aligned.m16n8k16.row.col).
__device__ inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                         const float (&c)[4]) {
#if defined(NANOFORGE_CUDA_EMULATION)
  emulator::ptx_mma_m16n8k16(d, a, b, c);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
#endif
}

// d = a b + c for one warp: A (16x32) and B (32x8) FP8 codes, B e4m3, A e4m3 or (kAIsE5m2) e5m2, C and D
// (16x8) f32 (mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.e4m3.f32, compute capability 8.9 and
// newer). A lane's register holds four consecutive k, so in bytes the fragments are m16n8k16's (above):
//   A: a[0] = (g, 4t..4t+3), a[1] = (g+8, 4t..), a[2] = (g, 4t+16..), a[3] = (g+8, 4t+16..)
//   B: b[0] = (4t..4t+3, g), b[1] = (4t+16..4t+19, g)                  (the lowest k in the lowest byte)
// and the ldmatrix loads of a 16-bit tile fill them from the same bytes.
template <bool kAIsE5m2>
__device__ inline void mma_m16n8k32_fp8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                        const float (&c)[4]) {
#if defined(NANOFORGE_CUDA_EMULATION)
  emulator::ptx_mma_m16n8k32_fp8(d, a, b, c, kAIsE5m2);
#else
  if constexpr (kAIsE5m2) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
  }
#endif
}

// Four 8x8 b16 matrices from shared memory for one warp (ldmatrix.sync.aligned.m8n8.x4.shared.b16): lanes
// 8i .. 8i+7 pass the addresses of rows 0-7 of matrix i (16 bytes each, 16-byte aligned); lane l receives in
// r[i] the two elements (l / 4, 2 (l % 4) .. +1) of matrix i.
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(NANOFORGE_CUDA_EMULATION)
  emulator::ptx_ldmatrix_x4(r, row);
#else
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

// The same with .trans: lane l receives in r[i] elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) of
// matrix i, i.e. the fragment of its transpose: a row-major (k, n) tile read as the B operand of an mma.
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#if defined(NANOFORGE_CUDA_EMULATION)
  emulator::ptx_ldmatrix_x4_trans(r, row);
#else
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

// One thread's asynchronous copy of 16 bytes from global memory to shared memory, bypassing L1
// (cp.async.cg.shared.global): `source` when `valid`, zeros otherwise (source size 0; `source` must still
// be a valid address). Both 16-byte aligned. The bytes are only there after cp_async_wait_group releases the
// group cp_async_commit_group put the copy in, and for other threads only after a barrier that follows it.
__device__ inline void cp_async_16(void* shared_destination, const void* global_source, bool valid) {
  const unsigned source_bytes = valid ? 16 : 0;
#if defined(NANOFORGE_CUDA_EMULATION)
  emulator::ptx_cp_async_16(shared_destination, global_source, source_bytes);
#else
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global_source),
               "r"(source_bytes));
#endif
}

// cp.async.commit_group: the thread's copies issued since its last commit form one group.
__device__ inline void cp_async_commit_group() {
#if defined(NANOFORGE_CUDA_EMULATION)
  emulator::ptx_cp_async_commit_group();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// cp.async.wait_group kPending: waits until at most the kPending newest of the thread's groups are in flight.
template <int kPending>
__device__ inline void cp_async_wait_group() {
#if defined(NANOFORGE_CUDA_EMULATION)
  emulator::ptx_cp_async_wait_group(kPending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace nanoforge::cuda::ptx
