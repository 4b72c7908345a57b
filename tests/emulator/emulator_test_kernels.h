// Small kernels that exercise the CUDA emulator itself (emulator_test_kernels.cu, compiled only for the
// emulator): each launcher queues its kernel on the default stream with the configuration given, so that the
// tests can check what the emulator runs, refuses and reports. Pointers are device memory unless a test means
// otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace nanoforge::emulator_test {

// out[block * threads + thread] += block * 4096 + thread + 1, linear indices (x fastest): every thread of
// every block adds its own mark once.
void record_indices(uint32_t* out, dim3 grid, dim3 block, cudaStream_t stream = nullptr);

// out[i] = value for i < count (grid-stride).
void fill(float* out, int64_t count, float value, cudaStream_t stream = nullptr);

// Warp w's lane 0 writes a block-dependent value to a shared slot; every thread then reads the next warp's
// slot, after a __syncthreads when `synchronized`: a race between warps when not.
void exchange_between_warps(float* out, int blocks, int threads, bool synchronized);

// Each lane writes a shared slot and reads its neighbour's, after a __syncwarp when `synchronized`.
void exchange_between_lanes(float* out, bool synchronized);

// The warp-synchronous intrinsics of one warp: for lane l, out[4 l .. 4 l + 3] = __shfl_sync(10 l, lane 3),
// __shfl_up_sync(10 l, 1, width 8), __shfl_down_sync(10 l, 2, width 16), __shfl_xor_sync(10 l, 5);
// ballots[l] = __ballot_sync(all, l % 3 == 0), ballots[32 + l] = __any_sync(all, l == 7),
// ballots[64 + l] = __all_sync(all, l < 32).
void warp_intrinsics(int* out, unsigned* ballots);

// Blocks that cannot finish: lanes 0-15 of each warp wait at __syncwarp, lanes 16-31 at __syncthreads.
void deadlock(int threads);
// Even lanes call __shfl_xor_sync, odd lanes __syncwarp, with the full mask.
void divergent_warp_calls();
// __syncthreads reached by warp 0 only; the other warps return first.
void barrier_after_exit(int threads);
// Thread 5 of block 1 calls __trap().
void trap(int blocks);

// out[i] = the i-th float of the block's dynamic shared memory as it is at block start (nothing written).
void read_fresh_shared_memory(float* out, int floats);
// A kernel that writes and reads the last of `bytes` of dynamic shared memory (*out = 42), and its opt-in:
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).
void use_shared_memory(int* out, size_t bytes);
cudaError_t allow_shared_memory(int bytes);

// wmma: rows / cols hold, for lane l and element i (8 per lane), the row and column of the accumulator
// element that lane l's x[i] holds, learnt by loading index tables into an accumulator fragment.
void fragment_positions(int* rows, int* cols);
// d (16x16 f32, row-major) = a (16x16 bf16, row-major) b (16x16 bf16, col-major) + c (16x16 f32, row-major).
void tile_mma(float* d, const uint16_t* a, const uint16_t* b, const float* c);
// The same through the inline-PTX path (kernels/cuda/mma_ptx.cuh): A loaded from shared memory by ldmatrix
// x4, B and C read into registers by the PTX ISA's layouts. d (16x8 f32, row-major) = a (16x16 bf16,
// row-major) b (16x8 bf16, col-major: b[n * 16 + k]) + c (16x8 f32, row-major).
void ptx_tile_mma(float* d, const uint16_t* a, const uint16_t* b, const float* c);
// ldmatrix x4 (or x4.trans) of one warp over a 16x16 b16 tile (row-major), matrix i = rows (i % 2) * 8 ..
// + 7, columns (i / 2) * 8 .. + 7: out[4 l + i] = lane l's register i.
void ldmatrix_registers(uint32_t* out, const uint16_t* tile, bool transpose);
// cp.async with 64 threads: thread i copies floats 4i .. 4i+3 of source into shared memory as group 0, and
// floats 256 + 4i .. of source (zero-filled for odd i) as group 1; out[16 i ..] records its group-0 chunk
// before any wait, its group-0 and group-1 chunks after wait_group 1, its group-1 chunk after wait_group 0.
void async_copy_stages(float* out, const float* source);
// cp.async of chunk i (4 floats) by thread i of 64, wait_group 0, then (after a __syncthreads when
// `synchronized`) out[4 i ..] = the chunk thread (i + 32) % 64 copied: a race between warps when not.
void async_copy_exchange(float* out, const float* source, bool synchronized);
// load_matrix_sync from `tile` plus `offset_bytes` (misaligned for a non-multiple of 32).
void misaligned_fragment_load(const float* tile, size_t offset_bytes);

}  // namespace nanoforge::emulator_test
